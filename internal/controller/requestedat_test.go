package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload/local"
)

// countingLister counts the verifications of the real verifier it wraps.
type countingLister struct {
	ToolLister
	calls atomic.Int32
}

func (c *countingLister) ListTools(ctx context.Context, target VerifyTarget) ([]mcpclient.Tool, error) {
	c.calls.Add(1)
	return c.ToolLister.ListTools(ctx, target)
}

// requestReconcile annotates obj as `kubectl annotate --overwrite ... cantus.dev/requestedAt=...` does.
func requestReconcile(g Gomega, ctx context.Context, obj crclient.Object, value string) {
	patch := crclient.MergeFrom(obj.DeepCopyObject().(crclient.Object))
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[cantusv1alpha1.ReconcileRequestAnnotation] = value
	obj.SetAnnotations(annotations)
	g.Expect(k8sClient.Patch(ctx, obj, patch)).To(Succeed())
}

// A verified server is not verified again until asked: the annotation alone (the
// generation does not move) verifies its pods once more and records the request handled.
func TestRequestedAtVerifiesASkillServerAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	verifier := &countingLister{ToolLister: &MCPVerifier{}}
	startManagerVerifying(t, local.New(nil), verifier)
	ss := newSkillServer(ns, "asked", templateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	g.Eventually(getSkillServer(ctx, ns, "asked")).Should(haveCondition(cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed))
	verifiedOnce := verifier.calls.Load()
	g.Expect(verifiedOnce).To(BeNumerically(">", 0))

	got, err := getSkillServer(ctx, ns, "asked")()
	g.Expect(err).NotTo(HaveOccurred())
	generation := got.Generation
	requestReconcile(g, ctx, got, "1700000000")
	g.Eventually(func() (string, error) {
		ss, err := getSkillServer(ctx, ns, "asked")()
		return ss.Status.LastHandledReconcileAt, err
	}).Should(Equal("1700000000"))
	g.Expect(verifier.calls.Load()).To(BeNumerically(">", verifiedOnce), "the request verified the pods again")
	got, _ = getSkillServer(ctx, ns, "asked")()
	g.Expect(got.Generation).To(Equal(generation), "an annotation does not move the generation")
	g.Expect(got).To(haveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
}

// An import refreshes on its interval; the annotation probes it now.
func TestRequestedAtProbesAnImportAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	allowLoopback(t, ns)
	startImportManager(t, 0)
	remote := newCountingServer(t, adapterHandler(t, "", "search_book"))
	imp := newImport(ns, "asked", remote.URL+"/mcp")
	imp.Spec.RefreshInterval = cantusv1alpha1.DurationFrom(time.Hour)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	get := func() (*cantusv1alpha1.RemoteToolImport, error) {
		got := &cantusv1alpha1.RemoteToolImport{}
		return got, k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)
	}
	g.Eventually(func() (int32, error) {
		got, err := get()
		return got.Status.ToolCount, err
	}).Should(Equal(int32(1)))
	probed := remote.requests.Load()

	got, err := get()
	g.Expect(err).NotTo(HaveOccurred())
	requestReconcile(g, ctx, got, "2025-01-02T03:04:05Z")
	g.Eventually(func() (string, error) {
		got, err := get()
		return got.Status.LastHandledReconcileAt, err
	}).Should(Equal("2025-01-02T03:04:05Z"))
	g.Expect(remote.requests.Load()).To(BeNumerically(">", probed), "the request probed the remote again")
}
