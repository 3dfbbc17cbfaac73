package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
)

// Content ConfigMaps (skill files, resource contents) carry cantus.dev/content=true.
// The manager's cache already selects ConfigMaps on app.kubernetes.io/managed-by (the
// owned children), and a label selector cannot OR two labels; rather than label every
// owned ConfigMap as content too (and so cache tenants' unrelated ConfigMaps as owned
// ones), the content ConfigMaps get a cache of their own, selecting only them.

// NewContentCache is the cache of the ConfigMaps labelled cantus.dev/content=true; add
// it to the manager (mgr.Add) and give it to the SkillServer reconciler.
func NewContentCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	opts.ByObject = map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{cantusv1alpha1.ContentLabel: "true"})},
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the cache of content ConfigMaps: %w", err)
	}
	return c, nil
}

// UseContentCache gives the reconciler a cache of the content ConfigMaps, run by mgr,
// and the manager's uncached reader for the label check. With namespaces it watches only
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
// be served (ContentValid=False; the pods keep the last good content).
func (r *SkillServerReconciler) renderContent(ctx context.Context, ss *cantusv1alpha1.SkillServer) (render.Content, bool, error) {
	specProblems, err := r.contentSpecProblems(ctx, ss)
	if err != nil {
		return render.Content{}, false, err
	}
	if len(specProblems) > 0 {
		setStalled(ss, errors.New(strings.Join(specProblems, "; ")))
		return render.Content{}, false, nil
	}
	in, err := r.contentInputs(ctx, ss)
	if err != nil {
		return render.Content{}, false, err
	}
	content, problems := render.RenderContent(ss, in)
	setContentValid(ss, problems)
	if len(problems) > 0 {
		clearStalled(ss)
		return render.Content{}, false, nil
	}
	setServedContent(ss, content)
	return content, true, nil
}

// ContentValid is the condition about the content the ConfigMaps hold; its reasons
// are render's ContentMissing and InvalidContent, or Valid.
const (
	conditionContentValid = "ContentValid"
	reasonContentValid    = "Valid"
)

// imageVolumeRuntime is a runtime that can mount images as volumes.
type imageVolumeRuntime interface{ ServesImageVolumes() bool }

// contentInputs reads the ConfigMaps the content names: from the content cache, and,
// for one the cache does not have, with one uncached GET, so that a ConfigMap that
// exists without the label is reported as such rather than as missing.
func (r *SkillServerReconciler) contentInputs(ctx context.Context, ss *cantusv1alpha1.SkillServer) (render.ContentInputs, error) {
	in := render.ContentInputs{ConfigMaps: map[string]*corev1.ConfigMap{}, Unlabelled: map[string]bool{}}
	for _, name := range render.ConfigMapNames(&ss.Spec) {
		key := types.NamespacedName{Namespace: ss.Namespace, Name: name}
		cm := &corev1.ConfigMap{}
		err := r.contentReader().Get(ctx, key, cm)
		if apierrors.IsNotFound(err) && r.APIReader != nil {
			err = r.APIReader.Get(ctx, key, cm)
		}
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return in, fmt.Errorf("get content ConfigMap %s: %w", name, err)
		case cm.Labels[cantusv1alpha1.ContentLabel] != "true":
			in.Unlabelled[name] = true
		default:
			in.ConfigMaps[name] = cm
		}
	}
	return in, nil
}

func (r *SkillServerReconciler) contentReader() client.Reader {
	if r.ContentCache != nil {
		return r.ContentCache
	}
	return r.Client
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
		apimeta.RemoveStatusCondition(&ss.Status.Conditions, conditionContentValid)
		return
	}
	if len(problems) == 0 {
		msg := "every agent skill and resource content passed its checks"
		if n := imageSkillCount(ss); n > 0 {
			// Said where kubectl describe shows it: the operator cannot read an image.
			msg = fmt.Sprintf("every agent skill from a ConfigMap and resource content passed its checks; the pods check the %d skill(s) from images when they mount them, and Verified says whether they serve them", n)
		}
		setCondition(ss, conditionContentValid, metav1.ConditionTrue, reasonContentValid, msg)
		return
	}
	messages := make([]string, 0, len(problems))
	for _, p := range problems {
		messages = append(messages, p.Message)
	}
	setCondition(ss, conditionContentValid, metav1.ConditionFalse, problems[0].Reason,
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
	list := &cantusv1alpha1.SkillServerList{}
	if err := r.List(ctx, list, client.InNamespace(cm.GetNamespace()), client.MatchingFields{contentConfigMapIndex: cm.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list SkillServers that read a content ConfigMap")
		return nil
	}
	return requestsFor(list.Items)
}

func (r *SkillServerReconciler) serversWithImageSkills(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &cantusv1alpha1.SkillServerList{}
	if err := r.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list SkillServers that mount skills from images")
		return nil
	}
	list.Items = slices.DeleteFunc(list.Items, func(ss cantusv1alpha1.SkillServer) bool {
		return !dependsOnPolicyMode(&ss) && !slices.ContainsFunc(ss.Spec.AgentSkills, func(s cantusv1alpha1.AgentSkill) bool { return s.Image != nil })
	})
	return requestsFor(list.Items)
}
