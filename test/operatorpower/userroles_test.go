package operatorpower

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The users' side of the same bounds: the roles config/rbac gives the cluster's view,
// edit and admin (aggregation itself needs a kube-controller-manager, so the node test
// checks it; here each role is bound directly), and the policy that keeps edit from
// approving definitions through an import's spec.approval.
func TestUserRolesAggregateAndOnlyApproversApprove(t *testing.T) {
	ctx := context.Background()
	grantClusterRole(t)
	wantAggregated := map[string]string{
		"cantus-viewer":   "rbac.authorization.k8s.io/aggregate-to-view",
		"cantus-editor":   "rbac.authorization.k8s.io/aggregate-to-edit",
		"cantus-approver": "rbac.authorization.k8s.io/aggregate-to-admin",
	}
	for name, label := range wantAggregated {
		role := &rbacv1.ClusterRole{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
			t.Fatalf("ClusterRole %s: %v", name, err)
		}
		if role.Labels[label] != "true" {
			t.Errorf("ClusterRole %s is not labelled %s=true: %v", name, label, role.Labels)
		}
	}

	ns := "user-roles"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	editor := userClient(t, ctx, ns, "ed", "cantus-viewer", "cantus-editor")
	approver := userClient(t, ctx, ns, "ap", "cantus-viewer", "cantus-editor", "cantus-approver")

	plain := importNamed(ns, "plain", nil)
	if err := editor.Create(ctx, plain); err != nil {
		t.Fatalf("an editor cannot create an import without an approval: %v", err)
	}
	if err := editor.List(ctx, &cantusv1alpha1.SkillServerList{}, client.InNamespace(ns)); err != nil {
		t.Errorf("a viewer cannot list SkillServers: %v", err)
	}

	digest := strings.Repeat("ab", 32)
	pinned := importNamed(ns, "pinned", &cantusv1alpha1.ImportApproval{Mode: cantusv1alpha1.ApprovalManual, Digest: digest})
	wantApprovalRefused(t, editor.Create(ctx, pinned.DeepCopy()), "an editor creating an import with approval.digest")

	manual := importNamed(ns, "manual", &cantusv1alpha1.ImportApproval{Mode: cantusv1alpha1.ApprovalManual})
	if err := approver.Create(ctx, manual); err != nil {
		t.Fatalf("an approver cannot create an import in Manual mode: %v", err)
	}
	fresh := &cantusv1alpha1.RemoteToolImport{}
	if err := editor.Get(ctx, client.ObjectKeyFromObject(manual), fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Spec.Approval.Digest = digest
	wantApprovalRefused(t, editor.Update(ctx, fresh.DeepCopy()), "an editor approving a digest through spec.approval")
	fresh.Spec.Approval = nil
	wantApprovalRefused(t, editor.Update(ctx, fresh.DeepCopy()), "an editor switching an import back to Automatic")
	fresh.Spec.Approval = &cantusv1alpha1.ImportApproval{Mode: cantusv1alpha1.ApprovalManual}
	fresh.Spec.RefreshInterval = ptrDuration("10m")
	if err := editor.Update(ctx, fresh); err != nil {
		t.Errorf("an editor cannot change the rest of the spec, approval unchanged: %v", err)
	}

	approval := &cantusv1alpha1.DefinitionApproval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-editor"},
		Spec: cantusv1alpha1.DefinitionApprovalSpec{ImportName: "manual", Digest: digest}}
	if err := editor.Create(ctx, approval); !apierrors.IsForbidden(err) {
		t.Errorf("an editor creating a DefinitionApproval: %v, want Forbidden", err)
	}
	if err := approver.Create(ctx, approval.DeepCopy()); err != nil {
		t.Errorf("an approver cannot create a DefinitionApproval: %v", err)
	}
	if err := approver.Create(ctx, pinned); err != nil {
		t.Errorf("an approver cannot create an import with approval.digest: %v", err)
	}
}

func wantApprovalRefused(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "needs permission to create DefinitionApprovals in namespace") {
		t.Errorf("%s: %v, want the approval policy's refusal", what, err)
	}
}

// userClient binds user to the cluster roles in ns and acts as the user.
func userClient(t *testing.T, ctx context.Context, ns, user string, roles ...string) client.Client {
	t.Helper()
	for _, role := range roles {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if err := admin.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func importNamed(ns, name string, approval *cantusv1alpha1.ImportApproval) *cantusv1alpha1.RemoteToolImport {
	return &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       cantusv1alpha1.RemoteToolImportSpec{URL: "https://mcp.example.com/mcp", Approval: approval},
	}
}

func ptrDuration(d string) *cantusv1alpha1.Duration {
	v := cantusv1alpha1.Duration(d)
	return &v
}
