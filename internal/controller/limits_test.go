package controller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// spec.limits reaches the adapter config, with the API server's defaults for what it
// leaves out, and status.limits shows what each pod applies (kubectl describe); a server
// without limits shows the defaults and its config keeps none (the adapter's defaults
// are the same), so it does not roll.
func TestLimitsReachTheConfigAndTheStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	limited := kubekit.NewSkillServer(ns, "limited", kubekit.TemplateSkill("echo", "ok"))
	limited.Spec.Limits = &cantusv1alpha1.CallLimits{ConcurrentCalls: ptr.To(int32(8)),
		PerCaller: &cantusv1alpha1.CallerRate{CallsPerSecond: 5}}
	plain := kubekit.NewSkillServer(ns, "plain", kubekit.TemplateSkill("echo", "ok"))
	for _, ss := range []*cantusv1alpha1.SkillServer{limited, plain} {
		g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
		_, err := kubernetesReconciler().Reconcile(ctx, kubekit.ReconcileRequest(ss))
		g.Expect(err).NotTo(HaveOccurred())
	}

	got, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "limited")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Spec.Limits.QueueLength).To(HaveValue(Equal(cantusv1alpha1.DefaultQueueLength)), "the API server's default")
	g.Expect(got.Status.Limits).To(Equal(&cantusv1alpha1.CallLimits{
		ConcurrentCalls: ptr.To(int32(8)), QueueLength: ptr.To(int32(64)), QueueWait: cantusv1alpha1.DurationFrom(10 * time.Second),
		PerCaller: &cantusv1alpha1.CallerRate{CallsPerSecond: 5, Burst: ptr.To(int32(5))},
	}))
	g.Expect(renderedConfig(t, ns, "limited").Limits).To(Equal(&adapterconfig.Limits{
		ConcurrentCalls: 8, QueueLength: 64, QueueWait: adapterconfig.Duration{Duration: 10 * time.Second},
		PerCaller: &adapterconfig.CallerRate{CallsPerSecond: 5, Burst: 5},
	}))

	got, err = kubekit.GetSkillServer(ctx, k8sClient, ns, "plain")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status.Limits).To(Equal(&cantusv1alpha1.CallLimits{
		ConcurrentCalls: ptr.To(int32(64)), QueueLength: ptr.To(int32(64)), QueueWait: cantusv1alpha1.DurationFrom(10 * time.Second)}))
	g.Expect(renderedConfig(t, ns, "plain").Limits).To(BeNil())
}

func renderedConfig(t *testing.T, ns, name string) adapterconfig.Config {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(context.Background(), crclient.ObjectKey{Namespace: ns, Name: name + "-adapter"}, cm); err != nil {
		t.Fatalf("get the adapter config of %s: %v", name, err)
	}
	var cfg adapterconfig.Config
	if err := json.Unmarshal([]byte(cm.Data[adapterconfig.ConfigFileName]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
