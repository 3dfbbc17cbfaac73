package operatorpower

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Connect mode keeps callers' accounts, pending connects and the catalog's self-signed
// certificate in Secrets of the operator's namespace, by its Role there and past its
// admission policy, even without its ClusterRole; under another name, or in another
// namespace, the same Secret is refused.
func TestCallerCredentials_OperatorKeepsConnectedAccountsOnlyInItsNamespace(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	waitForPolicy(t, operatorNamespace)
	dropClusterRole(t)
	waitUntilSecretsReadable(t, "default", false)
	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}
	secret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: own}, Data: map[string][]byte{"sealed": []byte("x")}}
	}
	for _, name := range []string{"cantus-connect-a-0123456789abcdef0123456789abcdef", "cantus-connect-p-0123456789abcdef0123456789abcdef", "cantus-connect-c-0123456789abcdef0123456789abcdef", "cantus-catalog-self-signed"} {
		s := secret(operatorNamespace, name)
		if err := operator.Create(ctx, s); err != nil {
			t.Fatalf("the operator cannot keep Secret %s in its namespace: %v", name, err)
		}
		s.Data["sealed"] = []byte("y")
		if err := operator.Update(ctx, s); err != nil {
			t.Fatalf("the operator cannot update Secret %s in its namespace: %v", name, err)
		}
		if err := operator.Delete(ctx, s); err != nil {
			t.Fatalf("the operator cannot delete Secret %s in its namespace: %v", name, err)
		}
	}
	if err := operator.Create(ctx, secret(operatorNamespace, "anything-else"), client.DryRunAll); err == nil {
		t.Error("the operator created another Secret in its namespace; only its connect Secrets are its own there")
	}
	if err := operator.Create(ctx, secret("default", "cantus-connect-a-0123456789abcdef0123456789abcdef"), client.DryRunAll); err == nil {
		t.Error("the operator created a connect Secret outside its namespace")
	}
}
