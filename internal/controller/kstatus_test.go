package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

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

	ss := kubekit.NewSkillServer(ns, "books", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	reconcile(ss)
	g.Expect(kubekit.KstatusOf(ctx, g, k8sClient, ss)).To(Equal(status.InProgressStatus), "pods not available yet")
	g.Expect(kubekit.FindCondition(ss, cantusv1alpha1.ConditionReconciling)).NotTo(BeNil())

	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(ss), dep)).To(Succeed())
	markDeploymentAvailable(g, ctx, dep)
	reconcile(ss)
	g.Expect(kubekit.KstatusOf(ctx, g, k8sClient, ss)).To(Equal(status.CurrentStatus), "Ready")
	g.Expect(kubekit.FindCondition(ss, cantusv1alpha1.ConditionReconciling)).To(BeNil())

	broken := kubekit.NewSkillServer(ns, "broken", kubekit.TemplateSkill("search_book", "found: {{ .title"))
	g.Expect(k8sClient.Create(ctx, broken)).To(Succeed())
	g.Expect(reconcileOnce(broken)).To(kubekit.BeTerminal(), "a spec that cannot work is not retried")
	g.Expect(kubekit.KstatusOf(ctx, g, k8sClient, broken)).To(Equal(status.FailedStatus), "a template that does not parse")
}

func TestRemoteToolImportStatusFollowsKstatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	srv := testkit.NewCountingServer(t, adapterHandler(t, "", "search_book"))
	imp := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "books", srv.URL+"/mcp"))
	g.Expect(kubekit.KstatusOf(ctx, g, k8sClient, imp)).To(Equal(status.CurrentStatus), "handshake succeeded")

	down := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "down", "http://127.0.0.1:1/mcp"))
	g.Expect(kubekit.KstatusOf(ctx, g, k8sClient, down)).To(Equal(status.InProgressStatus), "retrying a remote that does not answer")
}
