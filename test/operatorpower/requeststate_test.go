package operatorpower

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator writes a gateway's request state Secret, <server>-request-state
// controlled by that SkillServer, and under that name no other Secret.
func TestRequestStateKeys_OperatorWritesOnlyRequestStateSecretsOfItsServers(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	createNamespace(t, "tenant-request-state")
	waitForPolicy(t, "tenant-request-state")
	own := map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}
	secret := func(name, owner string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-request-state", Name: name, Labels: own,
			OwnerReferences: controlledBy("SkillServer", owner)}}
	}
	if err := operator.Create(ctx, secret("gw-request-state", "gw"), client.DryRunAll); err != nil {
		t.Errorf("the request state Secret of SkillServer gw is refused: %v", err)
	}
	err := operator.Create(ctx, secret("other-request-state", "gw"), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "cantus-operator-own-objects") {
		t.Errorf("another server's request state Secret: %v, want refused by cantus-operator-own-objects", err)
	}
}
