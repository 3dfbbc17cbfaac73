package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// A status computed from an object older than the stored one (the API server answers
// 409) is no failure: the reconcile runs again shortly, without an error and so without
// the controller's error backoff, and the next one writes the status. At 10,000
// SkillServers thousands of these went through the backoff's shared bucket.
func TestStaleStatusIsRetriedShortlyWithoutAnError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "stale", kubekit.TemplateSkill("search_book", "found: {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())

	apiClient, err := crclient.NewWithWatch(restConfig, crclient.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	conflicts := 0
	c := interceptor.NewClient(apiClient, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c crclient.Client, sub string, obj crclient.Object, patch crclient.Patch, opts ...crclient.SubResourcePatchOption) error {
			if sub == "status" && conflicts == 0 {
				conflicts++
				return apierrors.NewConflict(schema.GroupResource{Group: "cantus.dev", Resource: "skillservers"}, obj.GetName(), nil)
			}
			return c.Status().Patch(ctx, obj, patch, opts...)
		},
	})
	r := &SkillServerReconciler{Client: c, Runtime: workload.NewKubernetes(c, "img", "cluster.local")}

	result, err := r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred(), "a stale status is not a reconcile error")
	g.Expect(conflicts).To(Equal(1))
	g.Expect(result.RequeueAfter).To(And(BeNumerically(">", 0), BeNumerically("<=", staleStatusRetry)))

	_, err = r.Reconcile(ctx, kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())
	got, _ := kubekit.GetSkillServer(ctx, k8sClient, ns, "stale")()
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation), "the retry wrote the status")
}
