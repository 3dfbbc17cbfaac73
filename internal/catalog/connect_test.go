package catalog

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// statesOf answers the account states a test sets, by import and caller.
type statesOf map[string]string

func (s statesOf) State(_ context.Context, importRef, caller string) (string, error) {
	if state, ok := s[importRef+" "+caller]; ok {
		return state, nil
	}
	return ConnectStateNotConnected, nil
}

// An imported tool in connect mode says that its caller must connect first, where,
// whether this caller has, and where to disconnect; the link itself comes with the
// first call.
func TestCallerCredentials_CatalogSaysWhichToolsNeedTheCallerToConnect(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "connect")
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tracker"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{URL: "https://tracker.example.com/mcp",
			CallerCredentials: &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{}}},
	}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	imp.Status.CallerCredentials = &cantusv1alpha1.CallerCredentialsStatus{Mode: cantusv1alpha1.CallerCredentialsModeConnect, AuthorizationServer: "https://login.tracker.example.com"}
	g.Expect(k8sClient.Status().Update(ctx, imp)).To(Succeed())
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateway"},
		Spec:       cantusv1alpha1.SkillServerSpec{Imports: []cantusv1alpha1.SkillImport{{Name: "tracker"}}},
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	ss.Status.Tools = []cantusv1alpha1.ServedTool{{Name: "issues", Source: "import:tracker"}}
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())

	alice := adapterconfig.ServiceAccountCaller(ns+"/alice", "uid-a")
	c := &Catalog{Reader: k8sClient, Accounts: statesOf{ns + "/tracker " + alice: ConnectStateConnected}}
	viewerAs := func(name, uid string) *viewer {
		return &viewer{namespaces: map[string]bool{ns: true}, user: authnv1.UserInfo{Username: "system:serviceaccount:" + ns + ":" + name, UID: uid}}
	}
	servers, err := c.Servers(ctx, viewerAs("alice", "uid-a"))
	g.Expect(err).NotTo(HaveOccurred())
	tool := servers[0].Tools[0]
	g.Expect(tool.CallerCredentials).To(Equal(cantusv1alpha1.CallerCredentialsModeConnect))
	g.Expect(tool.Connect).NotTo(BeNil())
	g.Expect(tool.Connect.AuthorizationServer).To(Equal("https://login.tracker.example.com"))
	g.Expect(tool.Connect.State).To(Equal(ConnectStateConnected))
	g.Expect(tool.Connect.StartPath).To(Equal(adapterconfig.ConnectStartPath))
	g.Expect(tool.Connect.DisconnectPath).To(Equal(adapterconfig.ConnectDisconnect + "?import=" + ns + "/tracker"))
	g.Expect(tool.Connect.Note).To(ContainSubstring("capability"))
	servers, err = c.Servers(ctx, viewerAs("bob", "uid-b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(servers[0].Tools[0].Connect.State).To(Equal(ConnectStateNotConnected), "each caller sees its own state")
}
