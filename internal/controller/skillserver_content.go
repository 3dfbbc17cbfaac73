package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// Content ConfigMaps (skill files, resource contents) carry cantus.dev/content=true.
// The manager's cache already selects ConfigMaps on app.kubernetes.io/managed-by (the
// owned children), and a label selector cannot OR two labels; rather than label every
// owned ConfigMap as content too (and so cache tenants' unrelated ConfigMaps as owned
// ones), the content ConfigMaps get a cache of their own, selecting only them.
//
// Both caches hold ConfigMaps without their data (cacheTransform): any tenant can label
// a ConfigMap, and one SkillServer may name 64 MiB of content. The cache says which
// ConfigMaps exist, with which label and resourceVersion, and its events bring the
// reconciles; the bodies are read from the API server (APIReader), and only those of a
// resourceVersion not rendered before (contentRenders).

// NewContentCache is the cache of the ConfigMaps labelled cantus.dev/content=true,
// without their data; add it to the manager (mgr.Add) and give it to the SkillServer
// reconciler.
func NewContentCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	opts.ByObject = map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{cantusv1alpha1.ContentLabel: "true"})},
	}
	opts.DefaultTransform = cacheTransform
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the cache of content ConfigMaps: %w", err)
	}
	return c, nil
}

// UseContentCache gives the reconciler a cache of the content ConfigMaps, run by mgr,
// and the manager's uncached reader for their bodies. With namespaces it watches only
// those (the operator's --watch-namespaces, where it may not list ConfigMaps elsewhere).
func (r *SkillServerReconciler) UseContentCache(mgr ctrl.Manager, namespaces ...string) error {
	c, err := NewContentCache(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: CacheNamespaces(namespaces)})
	if err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("run the cache of content ConfigMaps: %w", err)
	}
	r.ContentCache, r.APIReader = c, mgr.GetAPIReader()
	return nil
}

// renderContent renders the content, an input of render.SkillServer. It returns false
// when nothing must be applied: a spec only a spec change can fix (Stalled), or ConfigMap content that cannot
// be served (ContentValid=False; the pods keep the last good content). The content's
// Files may be unread (contentRender.unread): nothing they come from changed since the
// last render, and their bytes were not read again.
func (r *SkillServerReconciler) renderContent(ctx context.Context, ss *cantusv1alpha1.SkillServer) (contentRender, bool, error) {
	specProblems, err := r.contentSpecProblems(ctx, ss)
	if err != nil {
		return contentRender{}, false, err
	}
	if len(specProblems) > 0 {
		setStalled(ss, errors.New(strings.Join(specProblems, "; ")))
		return contentRender{}, false, nil
	}
	rendered, err := r.contentOf(ctx, ss)
	if err != nil {
		return contentRender{}, false, err
	}
	setContentValid(ss, rendered.problems)
	if len(rendered.problems) > 0 {
		rendered.done()
		clearStalled(ss)
		return contentRender{}, false, nil
	}
	setServedContent(ss, rendered.content)
	return rendered, true, nil
}

// imageVolumeRuntime is a runtime that can mount images as volumes.
type imageVolumeRuntime interface{ ServesImageVolumes() bool }

// contentRender is what a SkillServer's content rendered to, and from what.
type contentRender struct {
	// sources names the spec's content and the resourceVersion of each ConfigMap read.
	sources  string
	content  render.Content
	problems []render.ContentProblem
	// unread: content.Files hold the digests of the files, not their bytes.
	unread bool
	// release gives back the share of contentRenders.reads the read took (nil: none).
	release func()
}

// done says that the bytes the render read are no longer needed.
func (c contentRender) done() {
	if c.release != nil {
		c.release()
	}
}

// contentOf renders the SkillServer's content from the bodies of its ConfigMaps, read
// from the API server, unless the last render for it read the same spec from the same
// resourceVersions: then that render is used again and no body is read.
func (r *SkillServerReconciler) contentOf(ctx context.Context, ss *cantusv1alpha1.SkillServer) (contentRender, error) {
	versions, err := r.contentVersions(ctx, ss)
	if err != nil {
		return contentRender{}, err
	}
	sources, err := contentSources(ss, versions)
	if err != nil {
		return contentRender{}, err
	}
	key := client.ObjectKeyFromObject(ss)
	if last, ok := r.contentRenders.recall(key, sources); ok {
		return last, nil
	}
	release, err := r.contentRenders.acquire(ctx, labelledCount(versions))
	if err != nil {
		return contentRender{}, fmt.Errorf("wait to read the content ConfigMaps: %w", err)
	}
	in, read, tooMuch, err := r.readContent(ctx, ss, versions)
	if err == nil {
		sources, err = contentSources(ss, read)
	}
	if err != nil {
		release()
		return contentRender{}, err
	}
	rendered := contentRender{sources: sources, release: release}
	if tooMuch != nil {
		rendered.problems = []render.ContentProblem{*tooMuch}
	} else {
		rendered.content, rendered.problems = render.RenderContent(ss, in)
	}
	r.contentRenders.remember(key, rendered)
	return rendered, nil
}

func labelledCount(versions map[string]contentVersion) int64 {
	var n int64
	for _, v := range versions {
		if v.labelled {
			n++
		}
	}
	return n
}

// contentVersion is what the metadata says of a content ConfigMap: absent, present
// without the label, or labelled at a resourceVersion.
type contentVersion struct {
	found, labelled bool
	resourceVersion string
}

func versionOf(obj client.Object) contentVersion {
	return contentVersion{found: true, labelled: obj.GetLabels()[cantusv1alpha1.ContentLabel] == "true", resourceVersion: obj.GetResourceVersion()}
}

// contentVersions reads the metadata of the ConfigMaps the content names: from the
// content cache, and, for one the cache does not have, from the API server by metadata
// only, so that a ConfigMap that exists without the label is reported as such rather
// than as missing, and its body (which may be anything) is never read.
func (r *SkillServerReconciler) contentVersions(ctx context.Context, ss *cantusv1alpha1.SkillServer) (map[string]contentVersion, error) {
	versions := map[string]contentVersion{}
	for _, name := range render.ConfigMapNames(&ss.Spec) {
		key := types.NamespacedName{Namespace: ss.Namespace, Name: name}
		cm := &corev1.ConfigMap{}
		err := r.contentReader().Get(ctx, key, cm)
		if err == nil {
			versions[name] = versionOf(cm)
			continue
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get content ConfigMap %s: %w", name, err)
		}
		if r.APIReader == nil {
			versions[name] = contentVersion{}
			continue
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		switch err := r.APIReader.Get(ctx, key, meta); {
		case apierrors.IsNotFound(err):
			versions[name] = contentVersion{}
		case err != nil:
			return nil, fmt.Errorf("get the metadata of content ConfigMap %s: %w", name, err)
		default:
			versions[name] = versionOf(meta)
		}
	}
	return versions, nil
}

// readContent reads the bodies of the labelled ConfigMaps from the API server, one after
// the other, keeping only the keys the spec reads of each, and returns them with what it
// found: a ConfigMap may have changed since the metadata was read. It stops with a
// problem once what it keeps exceeds what an adapter serves: a spec may name 320
// ConfigMaps of 1 MiB, and rendering them only to refuse them would hold them all.
func (r *SkillServerReconciler) readContent(ctx context.Context, ss *cantusv1alpha1.SkillServer, versions map[string]contentVersion) (render.ContentInputs, map[string]contentVersion, *render.ContentProblem, error) {
	in := render.ContentInputs{ConfigMaps: map[string]*corev1.ConfigMap{}, Unlabelled: map[string]bool{}}
	read := make(map[string]contentVersion, len(versions))
	keys := keysRead(&ss.Spec)
	held := 0
	for _, name := range slices.Sorted(maps.Keys(versions)) {
		v := versions[name]
		if !v.labelled {
			if v.found {
				in.Unlabelled[name] = true
			}
			read[name] = v
			continue
		}
		cm := &corev1.ConfigMap{}
		err := r.bodyReader().Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: name}, cm)
		switch {
		case apierrors.IsNotFound(err):
			read[name] = contentVersion{}
			continue
		case err != nil:
			return in, nil, nil, fmt.Errorf("get content ConfigMap %s: %w", name, err)
		}
		read[name] = versionOf(cm)
		if !read[name].labelled {
			in.Unlabelled[name] = true
			continue
		}
		held += keepOnly(cm, keys[name])
		in.ConfigMaps[name] = cm
		if held > adapterconfig.MaxContentBytes {
			for rest, v := range versions {
				if _, done := read[rest]; !done {
					read[rest] = v // as its metadata says: a change to it reads them again
				}
			}
			return in, read, &render.ContentProblem{Reason: cantusv1alpha1.ReasonInvalidContent, Message: fmt.Sprintf(
				"the keys the spec reads of its content ConfigMaps hold more than the %d MiB an adapter serves (%d MiB in the first %d of %d, by name)",
				adapterconfig.MaxContentBytes>>20, held>>20, len(in.ConfigMaps), labelledCount(versions))}, nil
		}
	}
	return in, read, nil, nil
}

// keySet is the keys the spec reads of one ConfigMap: all of them, or those named.
type keySet struct {
	all  bool
	keys map[string]bool
}

// keysRead are the keys the spec reads of each ConfigMap: every key of a skill's
// ConfigMap without items, the items' keys, a resource's key.
func keysRead(spec *cantusv1alpha1.SkillServerSpec) map[string]keySet {
	out := map[string]keySet{}
	add := func(name string, all bool, keys ...string) {
		set := out[name]
		set.all = set.all || all
		if set.keys == nil {
			set.keys = map[string]bool{}
		}
		for _, k := range keys {
			set.keys[k] = true
		}
		out[name] = set
	}
	for _, s := range spec.AgentSkills {
		if s.ConfigMap == nil {
			continue
		}
		keys := make([]string, 0, len(s.ConfigMap.Items))
		for _, item := range s.ConfigMap.Items {
			keys = append(keys, item.Key)
		}
		add(s.ConfigMap.Name, len(keys) == 0, keys...)
	}
	for _, r := range spec.Resources {
		if r.ConfigMapKeyRef != nil {
			add(r.ConfigMapKeyRef.Name, false, r.ConfigMapKeyRef.Key)
		}
	}
	return out
}

// keepOnly drops the keys of cm the spec does not read and returns the bytes it keeps.
func keepOnly(cm *corev1.ConfigMap, keys keySet) int {
	held := 0
	for k, v := range cm.Data {
		if !keys.all && !keys.keys[k] {
			delete(cm.Data, k)
			continue
		}
		held += len(v)
	}
	for k, v := range cm.BinaryData {
		if !keys.all && !keys.keys[k] {
			delete(cm.BinaryData, k)
			continue
		}
		held += len(v)
	}
	return held
}

// contentSources names what a render of the content reads: the spec's content fields
// and, for each ConfigMap, whether it exists with the label and at which
// resourceVersion.
func contentSources(ss *cantusv1alpha1.SkillServer, versions map[string]contentVersion) (string, error) {
	spec, err := json.Marshal([]any{ss.Spec.AgentSkills, ss.Spec.Resources, ss.Spec.ResourceTemplates, ss.Spec.Prompts})
	if err != nil {
		return "", fmt.Errorf("encode the content of the spec: %w", err)
	}
	h := sha256.New()
	h.Write(spec)
	for _, name := range slices.Sorted(maps.Keys(versions)) {
		v := versions[name]
		fmt.Fprintf(h, "\x00%s\x00%t\x00%t\x00%s", name, v.found, v.labelled, v.resourceVersion)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (r *SkillServerReconciler) contentReader() client.Reader {
	if r.ContentCache != nil {
		return r.ContentCache
	}
	return r.Client
}

// bodyReader reads what the content cache does not hold: the ConfigMaps' data.
func (r *SkillServerReconciler) bodyReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// contentRenders remember the last render of each SkillServer's content, without the
// files' bytes: one entry per SkillServer (the config entries, digests and status
// entries it rendered, not what they hold), dropped when the SkillServer goes.
//
// They also bound the bodies read and held at once by all the SkillServers reconciled
// in parallel: a reconcile holds the bodies it read (at most 1 MiB each) until its
// children are applied, and many tenants' servers changing at once, or every server
// after a restart, must not add up to more than the manager's memory.
type contentRenders struct {
	remembered[contentRender]
	// readsMu guards reads, made at the first read.
	readsMu sync.Mutex
	reads   *semaphore.Weighted
}

// maxContentReads is how many content ConfigMaps (of at most 1 MiB) may be read and held
// at once: as many as the largest content one server may serve (64 MiB). A server naming
// more waits until it may read as many, and then reads them all.
const maxContentReads = adapterconfig.MaxContentBytes >> 20

// acquire waits until n more ConfigMaps may be read and held (at most maxContentReads),
// and returns the function that gives them back.
func (c *contentRenders) acquire(ctx context.Context, n int64) (func(), error) {
	n = min(n, maxContentReads)
	if n == 0 {
		return func() {}, nil
	}
	c.readsMu.Lock()
	if c.reads == nil {
		c.reads = semaphore.NewWeighted(maxContentReads)
	}
	reads := c.reads
	c.readsMu.Unlock()
	if err := reads.Acquire(ctx, n); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { reads.Release(n) }) }, nil
}

func (c *contentRenders) recall(key types.NamespacedName, sources string) (contentRender, bool) {
	last, ok := c.load(key)
	return last, ok && last.sources == sources
}

func (c *contentRenders) remember(key types.NamespacedName, rendered contentRender) {
	rendered.content.Files = maps.Clone(rendered.content.Files)
	for digest := range rendered.content.Files {
		rendered.content.Files[digest] = nil
	}
	rendered.unread, rendered.release = true, nil
	c.store(key, rendered)
}

// applyWorkload applies desired. When its content was not read (nothing it comes from
// changed) and the runtime no longer holds it as it wrote it last (a restart of the
// operator, a shard someone edited or deleted), the bodies are read and it applies
// again.
func (r *SkillServerReconciler) applyWorkload(ctx context.Context, desired workload.Desired, rendered contentRender) (workload.Observation, error) {
	desired.Content, desired.ContentUnread = rendered.content.Files, rendered.unread
	obs, err := r.Runtime.Apply(ctx, desired)
	if !rendered.unread || !errors.Is(err, workload.ErrContentNotRead) {
		return obs, err
	}
	ss := desired.SkillServer
	r.contentRenders.forget(client.ObjectKeyFromObject(ss))
	reread, err := r.contentOf(ctx, ss)
	if err != nil {
		return workload.Observation{}, err
	}
	defer reread.done()
	if len(reread.problems) > 0 || !sameFiles(reread.content.Files, rendered.content.Files) {
		// Changed since it was rendered: the event about the change reconciles again.
		return workload.Observation{}, errors.New("a content ConfigMap changed while it was applied")
	}
	desired.Content, desired.ContentUnread = reread.content.Files, false
	return r.Runtime.Apply(ctx, desired)
}

func sameFiles(a, b map[string][]byte) bool {
	return slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
}

// contentSpecProblems are what only a spec change can fix: image skills on a runtime
// without image volumes, and images no ToolSourcePolicy allows.
func (r *SkillServerReconciler) contentSpecProblems(ctx context.Context, ss *cantusv1alpha1.SkillServer) ([]string, error) {
	var problems []string
	var images []string
	for i, s := range ss.Spec.AgentSkills {
		if s.Image != nil {
			images = append(images, s.Image.Reference)
			if rt, ok := r.Runtime.(imageVolumeRuntime); !ok || !rt.ServesImageVolumes() {
				problems = append(problems, fmt.Sprintf("spec.agentSkills[%d] (%s) comes from an image, which only the kubernetes runtime mounts: use a configMap source on this operator", i, s.SkillPath()))
			}
		}
	}
	if len(images) == 0 || len(problems) > 0 {
		return problems, nil
	}
	checker, err := policyCheckerFor(ctx, r.Client, ss.Namespace, nil)
	if err != nil {
		return nil, err
	}
	for _, image := range images {
		if d := checker.CheckImage(image); !d.Allowed {
			problems = append(problems, d.Message)
		}
	}
	return problems, nil
}

// setContentValid records whether the ConfigMaps' content can be served. While it
// cannot, nothing is applied: the pods keep the last good content.
func setContentValid(ss *cantusv1alpha1.SkillServer, problems []render.ContentProblem) {
	if len(ss.Spec.AgentSkills)+len(render.ConfigMapNames(&ss.Spec)) == 0 {
		apimeta.RemoveStatusCondition(&ss.Status.Conditions, cantusv1alpha1.ConditionContentValid)
		return
	}
	if len(problems) == 0 {
		msg := "every agent skill and resource content passed its checks"
		if n := imageSkillCount(ss); n > 0 {
			// Said where kubectl describe shows it: the operator cannot read an image.
			msg = fmt.Sprintf("every agent skill from a ConfigMap and resource content passed its checks; the pods check the %d skill(s) from images when they mount them, and Verified says whether they serve them", n)
		}
		setCondition(ss, cantusv1alpha1.ConditionContentValid, metav1.ConditionTrue, cantusv1alpha1.ReasonContentValid, msg)
		return
	}
	messages := make([]string, 0, len(problems))
	for _, p := range problems {
		messages = append(messages, p.Message)
	}
	setCondition(ss, cantusv1alpha1.ConditionContentValid, metav1.ConditionFalse, problems[0].Reason,
		"not served, the pods keep serving the last good content: "+listAtMost(messages, 10, "; "))
}

// imageSkillURIs are the URIs of the SKILL.md of the spec's skills from images, with the
// skill's name.
func imageSkillURIs(ss *cantusv1alpha1.SkillServer) map[string]string {
	uris := map[string]string{}
	for _, s := range ss.Spec.AgentSkills {
		if s.Image != nil {
			uris[adapterconfig.SkillURI(s.SkillPath(), adapterconfig.SkillManifestFile)] = s.Name
		}
	}
	return uris
}

// imageSkillEntries are the entries of skills that are the spec's skills from images.
func imageSkillEntries(ss *cantusv1alpha1.SkillServer, entries []cantusv1alpha1.ServedAgentSkill) []cantusv1alpha1.ServedAgentSkill {
	uris := imageSkillURIs(ss)
	var out []cantusv1alpha1.ServedAgentSkill
	for _, e := range entries {
		if _, ok := uris[e.URI]; ok {
			out = append(out, e)
		}
	}
	return out
}

// verifiedThisGeneration says whether the pods were verified for the current spec.
func verifiedThisGeneration(ss *cantusv1alpha1.SkillServer) bool {
	c := apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionVerified)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ss.Generation
}

// setAgentSkills sets status.agentSkills to entries in the spec's order; only what
// clients can load counts.
func setAgentSkills(ss *cantusv1alpha1.SkillServer, entries []cantusv1alpha1.ServedAgentSkill) {
	order := map[string]int{}
	for i, s := range ss.Spec.AgentSkills {
		order[adapterconfig.SkillURI(s.SkillPath(), adapterconfig.SkillManifestFile)] = i
	}
	slices.SortStableFunc(entries, func(a, b cantusv1alpha1.ServedAgentSkill) int { return order[a.URI] - order[b.URI] })
	ss.Status.AgentSkills = entries
	ss.Status.AgentSkillCount = int32(len(entries))
}

func imageSkillCount(ss *cantusv1alpha1.SkillServer) int {
	n := 0
	for _, s := range ss.Spec.AgentSkills {
		if s.Image != nil {
			n++
		}
	}
	return n
}

// setServedContent records the skills, prompts and resources served. The entries of
// skills from images come from the pods (the operator cannot read an image): those the
// last verification of this generation recorded are kept until the next one.
func setServedContent(ss *cantusv1alpha1.SkillServer, content render.Content) {
	var fromImages []cantusv1alpha1.ServedAgentSkill
	if verifiedThisGeneration(ss) {
		fromImages = imageSkillEntries(ss, ss.Status.AgentSkills)
	}
	setAgentSkills(ss, append(slices.Clone(content.Skills), fromImages...))
	ss.Status.Prompts = nil
	for _, p := range content.Prompts {
		ss.Status.Prompts = append(ss.Status.Prompts, p.Name)
	}
	ss.Status.PromptCount = int32(len(content.Prompts))
	ss.Status.Resources = nil
	for _, r := range content.Resources {
		ss.Status.Resources = append(ss.Status.Resources, r.URI)
	}
	ss.Status.ResourceCount = int32(len(content.Resources) + len(content.ResourceTemplates))
}

// contentSummary is what the Ready message adds for content, empty when there is none.
func contentSummary(ss *cantusv1alpha1.SkillServer) string {
	var parts []string
	if n := ss.Status.AgentSkillCount; n > 0 {
		parts = append(parts, fmt.Sprintf("%d agent skills", n))
	}
	if n := ss.Status.PromptCount; n > 0 {
		parts = append(parts, fmt.Sprintf("%d prompts", n))
	}
	if n := ss.Status.ResourceCount; n > 0 {
		parts = append(parts, fmt.Sprintf("%d resources", n))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

const contentConfigMapIndex = "cantus.dev/content-configmaps"

func contentConfigMaps(obj client.Object) []string {
	return render.ConfigMapNames(&obj.(*cantusv1alpha1.SkillServer).Spec)
}

// watchContent re-reconciles the SkillServers that read a content ConfigMap when it
// changes: from the content cache when there is one, else from the manager's cache
// (which then holds only owned ConfigMaps: content changes are seen on the next
// reconcile only).
func (r *SkillServerReconciler) watchContent(mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cantusv1alpha1.SkillServer{}, contentConfigMapIndex, contentConfigMaps); err != nil {
		return nil, fmt.Errorf("index SkillServers by content ConfigMap: %w", err)
	}
	// A policy that starts or stops allowing an image changes the servers mounting one;
	// one that changes mode changes the servers whose new refusals warn in Audit mode.
	b = b.Watches(&cantusv1alpha1.ToolSourcePolicy{}, handler.EnqueueRequestsFromMapFunc(r.serversWithImageSkills))
	if r.ContentCache == nil {
		return b, nil
	}
	return b.WatchesRawSource(source.Kind(r.ContentCache, &corev1.ConfigMap{},
		handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm *corev1.ConfigMap) []reconcile.Request {
			return r.serversReadingContent(ctx, cm)
		}))), nil
}

func (r *SkillServerReconciler) serversReadingContent(ctx context.Context, cm client.Object) []reconcile.Request {
	return r.serversIndexed(ctx, cm, contentConfigMapIndex, cm.GetName(), "that read a content ConfigMap")
}

func (r *SkillServerReconciler) serversWithImageSkills(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.serversWhere(ctx, "that mount skills from images", func(ss *cantusv1alpha1.SkillServer) bool {
		return dependsOnPolicyMode(ss) || slices.ContainsFunc(ss.Spec.AgentSkills, func(s cantusv1alpha1.AgentSkill) bool { return s.Image != nil })
	})
}
