package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The operator matches the parameters as config/admission/restricted_workloads.yaml
// does, so that what it lets through the policy lets through too.
func TestAdmissionParameterPatternsMatchAsThePolicyDoes(t *testing.T) {
	accounts := []struct {
		pattern, namespace, account string
		want                        bool
	}{
		{"*/default", "team-a", "default", true},
		{"*/default", "team-a", "runner", false},
		{"team-a/*", "team-a", "runner", true},
		{"team-a/*", "team-b", "runner", false},
		{"team-a/runner", "team-a", "runner", true},
		{"*/*", "any", "thing", true},
		{"runner", "team-a", "runner", false},
		{"team-a/runner/x", "team-a", "runner", false},
	}
	for _, tt := range accounts {
		if got := serviceAccountMatches(tt.pattern, tt.namespace, tt.account); got != tt.want {
			t.Errorf("serviceAccountMatches(%q, %q, %q) = %v, want %v", tt.pattern, tt.namespace, tt.account, got, tt.want)
		}
	}
	images := []struct {
		prefix, image string
		want          bool
	}{
		{"ghcr.io/acme", "ghcr.io/acme/tools:1", true},
		{"ghcr.io/acme/tools", "ghcr.io/acme/tools:1", true},
		{"ghcr.io/acme/tools", "ghcr.io/acme/tools@sha256:00", true},
		{"ghcr.io/acme/tools:1", "ghcr.io/acme/tools:1", true},
		{"ghcr.io/acme", "ghcr.io/acme-evil/tools:1", false},
		{"ghcr.io/acme/tools:1", "ghcr.io/acme/tools:10", false},
		{"*", "anything:1", true},
	}
	for _, tt := range images {
		if got := bridgeImageMatches(tt.prefix, tt.image); got != tt.want {
			t.Errorf("bridgeImageMatches(%q, %q) = %v, want %v", tt.prefix, tt.image, got, tt.want)
		}
	}
}

// A stdio import whose image the ToolSourcePolicy allows but the operator's admission
// parameters do not is refused before its bridge is applied (issue 39, R11), naming
// the parameter; listed, its bridge is applied.
func TestStdioImageNotInTheAdmissionParametersIsRefusedBeforeTheBridge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowStdio(t, k8sClient, ns, []string{"ghcr.io/acme/"}, []string{"mcp-server"})
	params := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cantus-operator-admission"},
		Data: map[string]string{"bridgeImages": "ghcr.io/other"}}
	g.Expect(k8sClient.Create(ctx, params)).To(Succeed())

	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/acme/tools:1.0", Command: []string{"mcp-server"}},
			Timeout:   cantusv1alpha1.DurationFrom(time.Second),
		},
	}
	r := importReconciler()
	r.Bridges = workload.NewKubernetes(k8sClient, "ghcr.io/cantus-dev/cantus-operator:test", "cluster.local").Bridges()
	r.AdmissionParams = &AdmissionParams{Reader: k8sClient, Key: crclient.ObjectKeyFromObject(params), MaxAge: time.Nanosecond}
	got := kubekit.ReconcileImport(t, k8sClient, r, imp)
	allowed := kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed)
	g.Expect(allowed.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonPodNotAdmitted))
	g.Expect(allowed.Message).To(ContainSubstring("image ghcr.io/acme/tools:1.0 is not in bridgeImages of the operator's admission policy parameters " + ns + "/cantus-operator-admission"))
	err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "acme-bridge"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a bridge the admission policy would refuse was applied: %v", err)

	// Bridge pods run under the namespace's default service account, which the
	// parameters must allow too.
	params.Data["bridgeImages"] = "ghcr.io/other, ghcr.io/acme"
	params.Data["serviceAccounts"] = "other/default"
	g.Expect(k8sClient.Update(ctx, params)).To(Succeed())
	got = kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed).Message).To(ContainSubstring("service account " + ns + "/default is not in serviceAccounts"))

	params.Data["serviceAccounts"] = "*/default"
	g.Expect(k8sClient.Update(ctx, params)).To(Succeed())
	got = kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(kubekit.ImportCondition(got, cantusv1alpha1.ConditionSourceAllowed).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "acme-bridge"}, &appsv1.Deployment{})).To(Succeed())
}
