package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/test/testenv/tokenservice"
	"github.com/cantus-dev/cantus-operator/test/testenv/whoami"
)

// A remote that wants a token even to list its tools: the operator's probe of an import
// whose calls carry each caller's credential is told so, then probes with a token of its
// own from the client credentials grant (once per token lifetime), and a wrong client
// secret or a token endpoint the policy refuses is a precise condition, with no secret
// or token in status or events.
func TestCallerCredentials_ProbeUsesClientCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	const clientSecret = "probe-client-secret-4e7b"
	ts, err := tokenservice.New(tokenservice.Options{Clients: []tokenservice.Client{
		{ID: "cantus-probe", Secret: clientSecret, ProbeAudience: []string{"whoami-remote"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(ts.Close)
	remote, err := whoami.New(whoami.Options{Issuer: ts.URL(), Keys: ts.Keys(), Audience: "whoami-remote"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(remote.Close)
	r := importReconciler()

	imp := kubekit.NewImport(ns, "whoami", remote.URL())
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	got := kubekit.ReconcileImport(t, k8sClient, r, imp)
	g.Expect(got).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionFalse, cantusv1alpha1.ReasonProbeIdentityRequired))
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, cantusv1alpha1.ConditionHandshakeSucceeded).Message).To(ContainSubstring("spec.probeCredentials"))

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe-client"}, StringData: map[string]string{"secret": "not-the-secret"}}
	g.Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	got.Spec.ProbeCredentials = &cantusv1alpha1.ProbeCredentials{ClientCredentials: &cantusv1alpha1.ClientCredentialsGrant{
		TokenEndpoint: ts.TokenEndpoint(), ClientID: "cantus-probe", ClientSecret: cantusv1alpha1.SecretKeyRef{Name: "probe-client", Key: "secret"}}}
	g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
	got = kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(got).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionUnknown, cantusv1alpha1.ReasonProbeTokenFailed))
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, cantusv1alpha1.ConditionHandshakeSucceeded).Message).To(And(
		ContainSubstring("cantus-probe"), ContainSubstring(ts.TokenEndpoint())))

	secret.StringData = map[string]string{"secret": clientSecret}
	g.Expect(k8sClient.Update(ctx, secret)).To(Succeed())
	got = kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(got).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionHandshakeSucceeded, metav1.ConditionTrue, cantusv1alpha1.ReasonHandshakeSucceeded))
	g.Expect(got.Status.Tools).NotTo(BeEmpty())
	g.Expect(ts.ClientCredentialsGrants("cantus-probe")).To(Equal(1))
	kubekit.ReconcileImport(t, k8sClient, r, got)
	g.Expect(ts.ClientCredentialsGrants("cantus-probe")).To(Equal(1), "the probe's token is reused until shortly before it expires")

	// A token endpoint the policy does not allow is never sent the client secret.
	stored := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(got), stored)).To(Succeed())
	stored.Spec.ProbeCredentials.ClientCredentials.TokenEndpoint = "http://127.0.0.9:9/token"
	g.Expect(k8sClient.Update(ctx, stored)).To(Succeed())
	got = kubekit.ReconcileImport(t, k8sClient, r, stored)
	g.Expect(got).To(kubekit.HaveImportCondition(cantusv1alpha1.ConditionSourceAllowed, metav1.ConditionFalse, cantusv1alpha1.ReasonProbeTokenEndpointNotAllowed))

	kubekit.ExpectNoValueInStatusOrEvents(t, k8sClient, ns, append([]string{clientSecret}, ts.IssuedTokens()...)...)
}

// probeCredentials without callerCredentials are refused by the API server: gateways
// would send nothing of the caller, and the probe's token is the operator's alone.
func TestCallerCredentials_ProbeCredentialsNeedCallerCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := kubekit.NewNamespace(t, k8sClient)
	imp := kubekit.NewImport(ns, "alone", "https://mcp.example.com/mcp")
	imp.Spec.ProbeCredentials = &cantusv1alpha1.ProbeCredentials{ClientCredentials: &cantusv1alpha1.ClientCredentialsGrant{
		TokenEndpoint: "https://login.example.com/token", ClientID: "x", ClientSecret: cantusv1alpha1.SecretKeyRef{Name: "s"}}}
	err := k8sClient.Create(context.Background(), imp)
	g.Expect(err).To(MatchError(ContainSubstring("probeCredentials authenticate the operator's probes")))
}
