package workload

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The revoked UIDs come back from the adapter configs the operator rendered (its own
// ConfigMaps only), once each.
func TestRevokedUIDsInConfigs(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	rendered := func(ns, name string, revoked ...string) *corev1.ConfigMap {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		cm, err := configMapFor(ss, &adapterconfig.Config{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
			Kind: adapterconfig.IssuerServiceAccount, URL: "https://kubernetes.default.svc", Audiences: []string{"a"}, RevokedUIDs: revoked,
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: *cm.Name, Labels: cm.Labels}, Data: cm.Data}
	}
	foreign := rendered("c", "someone-else", "not-ours")
	foreign.Labels = nil
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		rendered("a", "room", "pod-2", "account-1"), rendered("b", "hall", "pod-2"), rendered("b", "open"), foreign).Build()

	got, err := RevokedUIDsInConfigs(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"account-1", "pod-2"}; !slices.Equal(got, want) {
		t.Errorf("RevokedUIDsInConfigs = %v, want %v", got, want)
	}
}
