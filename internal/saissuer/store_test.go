package saissuer

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// A restarted operator recalls revocations only from what it kept in its own namespace.
// Values a tenant plants in its own server's adapter config (which it may edit: revoked
// UIDs of someone's service account, a refusal time just before the restart) are not
// recalled (issue 39, R12: they were read back from the adapter configs, so one tenant
// could refuse every token of the cluster after a restart it can force). What the
// operator kept is recalled, deletion times and namespaces included.
func TestPlantedRevocationsInAnAdapterConfigAreNotRecalled(t *testing.T) {
	cfg := testenv.StartForTest(t)
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"cantus-system", "tenant"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// The tenant's own server and its adapter config, as the operator rendered it, with
	// planted revocations.
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "srv"},
		Spec: cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{
			Name: "echo", InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object"},
			Template: &cantusv1alpha1.TemplateBackend{Text: "ok"},
		}}},
	}
	if err := c.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	planted := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	adapterConfig := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "srv-adapter",
			Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cantusv1alpha1.GroupVersion.String(), Kind: "SkillServer",
				Name: "srv", UID: ss.UID, Controller: ptr.To(true)}}},
		Data: map[string]string{"config.json": `{"auth":{"issuers":[{"kind":"serviceAccount",
			"revokedUIDs":["planted-pod"],"revokedServiceAccountUIDs":["planted-account"],
			"refuseIssuedBefore":"` + planted + `","refuseIssuedBeforeByNamespace":{"victim":"` + planted + `"}}]}}`},
	}
	if err := c.Create(ctx, adapterConfig); err != nil {
		t.Fatal(err)
	}

	store := &ConfigMapStore{Reader: c, Writer: c, Namespace: "cantus-system", FieldOwner: "cantus-operator",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cantus-operator"}}
	kept := time.Now().Add(-time.Minute).Truncate(time.Second)
	if err := store.Save(ctx, State{
		ServiceAccounts:    []Deletion{{UID: "kept-account", Namespace: "team-a", At: kept.Unix()}},
		RefuseIssuedBefore: map[string]time.Time{"team-b": kept},
	}); err != nil {
		t.Fatal(err)
	}

	r := &Revocations{MaxTokenLifetime: time.Hour, Recall: store.Recall, Save: store.Save}
	r.recall(ctx)
	got, err := r.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pods) != 0 || len(got.ServiceAccounts) != 1 || got.ServiceAccounts[0] != "kept-account" {
		t.Errorf("recalled pods %v and accounts %v, want only the kept account", got.Pods, got.ServiceAccounts)
	}
	if len(got.RefuseIssuedBefore) != 1 || !got.RefuseIssuedBefore["team-b"].Equal(kept) {
		t.Errorf("recalled refusals %v, want only team-b's kept one", got.RefuseIssuedBefore)
	}
	// Kept again as it was recalled.
	if err := store.Save(ctx, r.snapshot()); err != nil {
		t.Fatal(err)
	}
	again, err := store.Recall(ctx)
	if err != nil || len(again.ServiceAccounts) != 1 || again.ServiceAccounts[0] != (Deletion{UID: "kept-account", Namespace: "team-a", At: kept.Unix()}) {
		t.Errorf("kept again: %+v, %v", again, err)
	}
}
