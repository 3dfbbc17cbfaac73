//go:build cluster

package cluster

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/catalog"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// Issue 35, item 6, on a real node, whose kube-controller-manager aggregates the roles
// config/rbac labels: a service account bound only to the cluster's view role lists the
// namespace's SkillServers with kubectl's API and reads them from the catalog and the
// registry API; one bound to edit cannot create a DefinitionApproval nor approve through
// an import's spec.approval.
func TestViewAndEditRolesSeeServersButDoNotApprove(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	viewer := boundServiceAccount(t, ctx, ns, "viewer", "view")
	editor := boundServiceAccount(t, ctx, ns, "editor", "edit")
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "shelf", Namespace: ns},
		Spec:       cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{templateSkill("find_book", "found")}},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx, types.NamespacedName{Namespace: ns, Name: "shelf"})

	// Aggregation is asynchronous: the controller-manager fills view in shortly after the
	// roles appear.
	var listed cantusv1alpha1.SkillServerList
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return viewer.List(ctx, &listed, client.InNamespace(ns)) == nil, nil
	})
	if err != nil || len(listed.Items) != 1 {
		t.Fatalf("a service account bound to view lists %d SkillServers (%v), want 1", len(listed.Items), err)
	}

	token := serviceAccountToken(t, ctx, ns, "viewer", catalog.DefaultAudience)
	for _, path := range []string{"/v1/servers", "/v0.1/servers"} {
		if body := catalogGet(t, ctx, path, token); !strings.Contains(body, "shelf") {
			t.Errorf("GET %s as the view-bound account does not name the server: %s", path, body)
		}
	}

	approval := &cantusv1alpha1.DefinitionApproval{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-editor"},
		Spec: cantusv1alpha1.DefinitionApprovalSpec{ImportName: "any", Digest: strings.Repeat("ab", 32)}}
	if err := editor.Create(ctx, approval); !apierrors.IsForbidden(err) {
		t.Errorf("an edit-bound account creating a DefinitionApproval: %v, want Forbidden", err)
	}
	pinned := &cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{URL: "https://mcp.example.com/mcp",
			Approval: &cantusv1alpha1.ImportApproval{Mode: cantusv1alpha1.ApprovalManual, Digest: strings.Repeat("ab", 32)}}}
	if err := editor.Create(ctx, pinned); err == nil || !strings.Contains(err.Error(), "needs permission to create DefinitionApprovals") {
		t.Errorf("an edit-bound account approving through spec.approval: %v, want the approval policy's refusal", err)
	}
	pinned.Spec.Approval = nil
	if err := editor.Create(ctx, pinned); err != nil {
		t.Errorf("an edit-bound account cannot create an import: %v", err)
	}
}

// boundServiceAccount makes a service account bound in ns to the cluster role, and a
// client that acts as it.
func boundServiceAccount(t *testing.T, ctx context.Context, ns, name, role string) client.Client {
	t.Helper()
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate.UserName = "system:serviceaccount:" + ns + ":" + name
	cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// catalogGet GETs path of the catalog through its Service with token.
func catalogGet(t *testing.T, ctx context.Context, path, token string) string {
	t.Helper()
	var svc corev1.Service
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "cantus-system", Name: "cantus-catalog"}, &svc); err != nil {
		t.Fatalf("the catalog's Service: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+svc.Spec.ClusterIP+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// The catalog serves a self-signed certificate unless --catalog-cert-dir names one.
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	return string(body)
}
