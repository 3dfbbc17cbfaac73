package controller

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// startManagerCountingBodyReads starts a manager whose uncached reads go through the
// returned counter.
func startManagerCountingBodyReads(t *testing.T) *bodyReads {
	t.Helper()
	reads := &bodyReads{}
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil, func(r *SkillServerReconciler) {
		reads.Reader = r.APIReader
		r.APIReader = reads
	})
	return reads
}

// bodyReads counts the reads of whole ConfigMaps (data included) through a reader, by
// namespace/name; reads of metadata only are not counted.
type bodyReads struct {
	crclient.Reader
	mu    sync.Mutex
	names []string
}

func (b *bodyReads) Get(ctx context.Context, key crclient.ObjectKey, obj crclient.Object, opts ...crclient.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		b.mu.Lock()
		b.names = append(b.names, key.String())
		b.mu.Unlock()
	}
	return b.Reader.Get(ctx, key, obj, opts...)
}

func (b *bodyReads) of(key crclient.ObjectKey) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, got := range b.names {
		if got == key.String() {
			n++
		}
	}
	return n
}

// servedDigest is the manifest digest of the first agent skill in the status.
func servedDigest(ss *cantusv1alpha1.SkillServer) string {
	if len(ss.Status.AgentSkills) == 0 {
		return ""
	}
	return ss.Status.AgentSkills[0].Digest
}

// R9: neither of the manager's caches holds the data of a ConfigMap: not the content
// ConfigMaps a tenant labels, not one labelled as the operator's by anyone, not the
// operator's own adapter config and content shards. A SkillServer reading its content
// from a ConfigMap still renders it, and its shards on the API server hold the bytes.
func TestManagerCachesHoldNoConfigMapData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kube := workload.NewKubernetes(nil, "img", "cluster.local")
	var reconciler *SkillServerReconciler
	startManagerVerifying(t, kube, nil, func(r *SkillServerReconciler) { reconciler = r })

	forms := "# Forms\n" + strings.Repeat("field: value\n", 1000)
	g.Expect(k8sClient.Create(ctx, kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": forms}, true))).To(Succeed())
	spoofed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoofed",
		Labels: map[string]string{workload.LabelManagedBy: workload.FieldOwner, cantusv1alpha1.ContentLabel: "true"}},
		BinaryData: map[string][]byte{"blob": bytes.Repeat([]byte{7}, 512<<10)}}
	g.Expect(k8sClient.Create(ctx, spoofed)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())

	want := expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(kubekit.FormsSkillMD), "references/FORMS.md": []byte(forms)})
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(WithTransform(servedDigest, Equal(want)))
	shard := &corev1.ConfigMap{}
	g.Eventually(func() error {
		return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs-content-0"}, shard)
	}).Should(Succeed())
	g.Expect(shard.BinaryData).To(HaveKeyWithValue(testkit.HexSHA256([]byte(forms)), []byte(forms)), "the shard on the API server holds the bytes")

	// The kubernetes runtime reads its children through the manager's cache.
	for _, name := range []string{"docs-content-0", "docs-adapter", "spoofed"} {
		cached := &corev1.ConfigMap{}
		g.Eventually(func() error { return kube.Client.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, cached) }).Should(Succeed())
		g.Expect(cached.Data).To(BeEmpty(), "the manager's cache holds the data of %s", name)
		g.Expect(cached.BinaryData).To(BeEmpty(), "the manager's cache holds the binary data of %s", name)
	}
	for _, name := range []string{"pdf", "spoofed"} {
		cached := &corev1.ConfigMap{}
		g.Eventually(func() error {
			return reconciler.ContentCache.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, cached)
		}).Should(Succeed())
		g.Expect(cached.Data).To(BeEmpty(), "the content cache holds the data of %s", name)
		g.Expect(cached.BinaryData).To(BeEmpty(), "the content cache holds the binary data of %s", name)
	}
}

// R9: the body of a content ConfigMap is read from the API server once per
// resourceVersion: reconciles for other reasons (a spec change elsewhere, the children's
// events) render the content without reading it again; an edit is read once.
func TestContentConfigMapBodyIsReadOncePerResourceVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	reads := startManagerCountingBodyReads(t)
	cm := kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": "# Forms"}, true)
	g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	first := expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(kubekit.FormsSkillMD), "references/FORMS.md": []byte("# Forms")})
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(WithTransform(servedDigest, Equal(first)))
	g.Expect(reads.of(crclient.ObjectKeyFromObject(cm))).To(Equal(1), "the body is read once, from the API server")

	// A spec change that does not touch the content reconciles without a read.
	ss, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubekit.Update(ctx, k8sClient, ss, func(ss *cantusv1alpha1.SkillServer) {
		ss.Spec.Skills = append(ss.Spec.Skills, kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	})).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(HaveField("Status.ObservedGeneration", ss.Generation))
	g.Consistently(func() int { return reads.of(crclient.ObjectKeyFromObject(cm)) }, 2*time.Second).Should(Equal(1), "an unchanged ConfigMap was read again")

	cm.Data["references.FORMS.md"] = "# Forms, edited"
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	second := expectedManifestDigest(map[string][]byte{"SKILL.md": []byte(kubekit.FormsSkillMD), "references/FORMS.md": []byte("# Forms, edited")})
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(WithTransform(servedDigest, Equal(second)))
	g.Consistently(func() int { return reads.of(crclient.ObjectKeyFromObject(cm)) }, 2*time.Second).Should(Equal(2), "the edit is read once")
}

// A content shard someone deletes or edits is written again, although no ConfigMap the
// content comes from changed (so the reconcile has not read their bodies): the cache's
// digest of the shard's data tells, and the bodies are read then.
func TestEditedOrDeletedContentShardIsWrittenAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	startManagerVerifying(t, workload.NewKubernetes(nil, "img", "cluster.local"), nil)
	g.Expect(k8sClient.Create(ctx, kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": "# Forms"}, true))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	key := crclient.ObjectKey{Namespace: ns, Name: "docs-content-0"}
	wantData := map[string][]byte{testkit.HexSHA256([]byte(kubekit.FormsSkillMD)): []byte(kubekit.FormsSkillMD), testkit.HexSHA256([]byte("# Forms")): []byte("# Forms")}
	shardData := func() (map[string][]byte, error) {
		shard := &corev1.ConfigMap{}
		err := k8sClient.Get(ctx, key, shard)
		return shard.BinaryData, err
	}
	g.Eventually(shardData).Should(Equal(wantData))

	shard := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, key, shard)).To(Succeed())
	shard.BinaryData[testkit.HexSHA256([]byte("# Forms"))] = []byte("# Not the forms")
	g.Expect(k8sClient.Update(ctx, shard)).To(Succeed())
	g.Eventually(shardData).Should(Equal(wantData), "an edited shard is taken back")

	g.Expect(k8sClient.Get(ctx, key, shard)).To(Succeed())
	g.Expect(k8sClient.Delete(ctx, shard)).To(Succeed())
	g.Eventually(shardData).Should(Equal(wantData), "a deleted shard is written again")
}

// requestLog records the API requests a manager sends that write, by method and path,
// and the paths it reads.
type requestLog struct {
	mu     sync.Mutex
	writes []string
	reads  []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		if req.Method != http.MethodGet {
			l.writes = append(l.writes, req.Method+" "+req.URL.Path)
		} else {
			l.reads = append(l.reads, req.URL.Path)
		}
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// read says whether the manager has read path.
func (l *requestLog) read(path string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.reads, path)
}

func (l *requestLog) of(ns string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.writes {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			out = append(out, w)
		}
	}
	return out
}

// startContentManager runs a manager with the kubernetes runtime as cmd/manager sets it
// up, its requests logged, until stop is called or the test ends.
func startContentManager(t *testing.T, log *requestLog) (stop func()) {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = log.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      CacheOptions(), Client: ClientOptions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	kube := workload.NewKubernetes(ChildClient(mgr), "example.com/cantus:test", "cluster.local")
	kube.APIReader = mgr.GetAPIReader()
	r := &SkillServerReconciler{Client: mgr.GetClient(), Runtime: kube, Recorder: mgr.GetEventRecorder("cantus-operator")}
	if err := r.UseContentCache(mgr); err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// A restarted operator (empty caches, no render remembered) reads the content once and
// rewrites nothing: its shards and adapter config hold what it would write, which it
// tells by the digest of their data since its cache holds none.
func TestRestartedManagerRewritesNoContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	first := &requestLog{}
	stop := startContentManager(t, first)
	g.Expect(k8sClient.Create(ctx, kubekit.SkillConfigMap(ns, "pdf", map[string]string{"SKILL.md": kubekit.FormsSkillMD, "references.FORMS.md": strings.Repeat("x", 950<<10)}, true))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.ContentSkillServer(ns, "docs"))).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(HaveField("Status.ObservedGeneration", int64(1)))
	g.Eventually(func() error {
		return k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "docs-content-1"}, &corev1.ConfigMap{})
	}).Should(Succeed(), "two shards: a file larger than a shard gets one of its own")
	// A reconcile asked for after the children exist, and handled: the first manager
	// has seen its children before it stops.
	docs, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")()
	g.Expect(err).NotTo(HaveOccurred())
	kubekit.RequestReconcile(t, ctx, k8sClient, docs, "children-seen")
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "docs")).Should(HaveField("Status.LastHandledReconcileAt", "children-seen"))
	g.Expect(first.of(ns)).NotTo(BeEmpty())
	stop()

	// The restarted manager reads the content (its cache holds none) in its reconcile of
	// docs, and writes, if at all, before that reconcile ends.
	restarted := &requestLog{}
	startContentManager(t, restarted)
	testkit.EventuallyTrue(t, 30*time.Second, "the restarted manager to read the content", func() bool {
		return restarted.read("/api/v1/namespaces/" + ns + "/configmaps/pdf")
	})
	testkit.Eventually(t, 30*time.Second, "the restarted manager's reconciles to end", func() error {
		if n := activeReconciles(t, "skillserver"); n != 0 {
			return fmt.Errorf("%v reconciles running", n)
		}
		return nil
	})
	g.Expect(restarted.of(ns)).To(BeEmpty(), "a restarted manager rewrote unchanged children")
}

// The bodies read and held at once, over every SkillServer reconciled in parallel, are
// bounded by as many ConfigMaps as one server's largest content: a server naming more
// takes the whole share, and the next read waits until it is given back.
func TestContentReadsAreBoundedAcrossServers(t *testing.T) {
	var renders contentRenders
	ctx := context.Background()
	release, err := renders.acquire(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := renders.acquire(waiting, 1); err == nil {
		t.Fatal("a read went past the bound")
	}
	release()
	release() // giving back twice gives back once
	first, err := renders.acquire(ctx, maxContentReads-1)
	if err != nil {
		t.Fatal(err)
	}
	second, err := renders.acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := renders.acquire(waiting, 1); err == nil {
		t.Fatal("a read went past the bound after giving back twice")
	}
	first()
	second()
}

// R9: a spec may name up to 320 ConfigMaps of 1 MiB. Their bodies are read one after the
// other, keeping only the keys the spec reads, and the reading stops once those hold
// more than the 64 MiB an adapter serves: the content is refused without all of them
// in memory, and not read again until one of them changes.
func TestContentBeyondWhatAnAdapterServesIsNotReadWhole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	reads := startManagerCountingBodyReads(t)
	ss := kubekit.NewSkillServer(ns, "hoard")
	const configMaps = 70
	for i := range configMaps {
		name := fmt.Sprintf("blob-%02d", i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{cantusv1alpha1.ContentLabel: "true"}},
			BinaryData: map[string][]byte{"blob": bytes.Repeat([]byte{byte(i)}, 1000<<10), "unread": bytes.Repeat([]byte{1}, 20<<10)},
		}
		g.Expect(k8sClient.Create(ctx, cm)).To(Succeed())
		ss.Spec.Resources = append(ss.Spec.Resources, cantusv1alpha1.ServedResource{
			URI: fmt.Sprintf("blobs://%d", i), Name: name, ConfigMapKeyRef: &cantusv1alpha1.ContentKeyRef{Name: name, Key: "blob"},
		})
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "hoard"), 60*time.Second).Should(
		kubekit.HaveCondition(cantusv1alpha1.ConditionContentValid, metav1.ConditionFalse, cantusv1alpha1.ReasonInvalidContent))
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "hoard")()
	g.Expect(kubekit.FindCondition(got, cantusv1alpha1.ConditionContentValid).Message).To(ContainSubstring("more than the 64 MiB an adapter serves"))
	total := func() int {
		n := 0
		for i := range configMaps {
			n += reads.of(crclient.ObjectKey{Namespace: ns, Name: fmt.Sprintf("blob-%02d", i)})
		}
		return n
	}
	// 1000 KiB kept of each (not the 20 KiB the spec does not read): the 66th goes past.
	g.Expect(total()).To(Equal(66), "the bodies read")
	g.Consistently(total, 2*time.Second).Should(Equal(66), "read again although none changed")
}

// activeReconciles is the number of reconciles controller is running now, in every
// manager of this test process (controller-runtime's metrics registry is the process's).
func activeReconciles(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_active_workers" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
