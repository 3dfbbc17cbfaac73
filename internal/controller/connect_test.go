package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// metadataServer serves an authorization server's RFC 8414 metadata, naming token as its
// token endpoint.
func metadataServer(t *testing.T, token func(issuer string) string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-authorization-server" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": token(srv.URL), "revocation_endpoint": srv.URL + "/revoke",
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An import in connect mode needs the operator's connect endpoints and a client; its
// authorization server's endpoints are held to the policy and to https away from
// loopback, and those accepted are recorded in the status.
func TestCallerCredentials_ConnectAuthorizationServerIsHeldToThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := allowLoopback(t, ns)
	p.Spec.Hosts = []string{"127.0.0.1", "sts.example"}
	g.Expect(k8sClient.Update(ctx, p)).To(Succeed())
	remote := newCountingServer(t, adapterHandler(t, "", "issues"))
	preRegistered := &cantusv1alpha1.ConnectClient{ClientID: "cantus"}
	reason := func(imp *cantusv1alpha1.RemoteToolImport) string {
		return importCondition(imp, cantusv1alpha1.ConditionSourceAllowed).Reason
	}

	r := importReconciler()
	r.Resolver = staticResolver{"sts.example": netip.MustParseAddr("192.0.2.10")}
	off := newImport(ns, "off", remote.URL+"/mcp")
	off.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{Client: preRegistered}}
	g.Expect(reason(reconcileImport(t, r, off))).To(Equal(cantusv1alpha1.ReasonConnectUnavailable))

	r.Connect = &ConnectSettings{}
	noClient := newImport(ns, "noclient", remote.URL+"/mcp")
	noClient.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{}}
	g.Expect(reason(reconcileImport(t, r, noClient))).To(Equal(cantusv1alpha1.ReasonConnectClientRequired))

	plain := metadataServer(t, func(string) string { return "http://sts.example/token" })
	insecure := newImport(ns, "insecure", remote.URL+"/mcp")
	insecure.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{AuthorizationServer: plain.URL, Client: preRegistered}}
	got := reconcileImport(t, r, insecure)
	allowed := importCondition(got, cantusv1alpha1.ConditionSourceAllowed)
	g.Expect(allowed.Reason).To(Equal(cantusv1alpha1.ReasonAuthorizationServerNotAllowed))
	g.Expect(allowed.Message).To(And(ContainSubstring("token_endpoint"), ContainSubstring(policy.ReasonInsecureTokenEndpoint)))
	g.Expect(remote.requests.Load()).To(BeZero(), "a refused import is not probed")

	loopback := metadataServer(t, func(issuer string) string { return issuer + "/token" })
	good := newImport(ns, "good", remote.URL+"/mcp")
	good.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{Connect: &cantusv1alpha1.Connect{AuthorizationServer: loopback.URL, Client: preRegistered}}
	got = reconcileImport(t, r, good)
	g.Expect(importCondition(got, cantusv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "%+v", got.Status.Conditions)
	g.Expect(got.Status.CallerCredentials).To(Equal(&cantusv1alpha1.CallerCredentialsStatus{
		Mode: cantusv1alpha1.CallerCredentialsModeConnect, AuthorizationServer: loopback.URL, AuthorizationServerChecked: true,
		Endpoints: &cantusv1alpha1.AuthorizationServerEndpoints{Authorization: loopback.URL + "/authorize", Token: loopback.URL + "/token", Revocation: loopback.URL + "/revoke"},
		Client:    cantusv1alpha1.ConnectClientPreRegistered,
	}))
}
