package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// kstatusOf computes what kstatus-based tools (Flux, Argo CD health, cli-utils) make of
// the stored object.
func kstatusOf(g Gomega, ctx context.Context, obj crclient.Object) status.Status {
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(obj), obj)).To(Succeed())
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: data})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// Ready, Reconciling and Stalled follow kstatus: InProgress while the pods come up,
// Current once Ready, Failed when the spec cannot work.
func TestSkillServerStatusFollowsKstatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	r := &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")}
	reconcileOnce := func(ss *cantusv1alpha1.SkillServer) error {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(ss)})
		return err
	}
	reconcile := func(ss *cantusv1alpha1.SkillServer) { g.Expect(reconcileOnce(ss)).To(Succeed()) }

	ss := newSkillServer(ns, "books", templateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	reconcile(ss)
	g.Expect(kstatusOf(g, ctx, ss)).To(Equal(status.InProgressStatus), "pods not available yet")
	g.Expect(findCondition(ss, cantusv1alpha1.ConditionReconciling)).NotTo(BeNil())

	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(ss), dep)).To(Succeed())
	markDeploymentAvailable(g, ctx, dep)
	reconcile(ss)
	g.Expect(kstatusOf(g, ctx, ss)).To(Equal(status.CurrentStatus), "Ready")
	g.Expect(findCondition(ss, cantusv1alpha1.ConditionReconciling)).To(BeNil())

	broken := newSkillServer(ns, "broken", templateSkill("search_book", "found: {{ .title"))
	g.Expect(k8sClient.Create(ctx, broken)).To(Succeed())
	g.Expect(reconcileOnce(broken)).To(beTerminal(), "a spec that cannot work is not retried")
	g.Expect(kstatusOf(g, ctx, broken)).To(Equal(status.FailedStatus), "a template that does not parse")
}

func TestRemoteToolImportStatusFollowsKstatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	imp := reconcileImport(t, importReconciler(), newImport(ns, "books", srv.URL+"/mcp"))
	g.Expect(kstatusOf(g, ctx, imp)).To(Equal(status.CurrentStatus), "handshake succeeded")

	down := reconcileImport(t, importReconciler(), newImport(ns, "down", "http://127.0.0.1:1/mcp"))
	g.Expect(kstatusOf(g, ctx, down)).To(Equal(status.InProgressStatus), "retrying a remote that does not answer")
}
