package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/render"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// A gateway gathers its import's per-caller Secrets into its caller-keys Secret, keyed
// by caller identity: a service account's with its UID (recreated, it is a new caller
// with a new key name) and an OIDC issuer and subject. A changed per-caller Secret
// changes the keys, on the local runtime's files too, without a new config hash; and no
// value shows in any status or event.
func TestCallerCredentials_CallerKeysSecretFollowsPerCallerSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	filesDir := startGatewayManager(t)
	remote := remoteLibrary(t)

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
	g.Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	const saValue, oidcValue, newValue = "sa-secret-value-1f3a", "oidc-secret-value-9c2e", "sa-secret-value-rotated-77d1"
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "agent-notes", "notes", "serviceaccount:"+ns+"/agent", saValue))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "alice-notes", "notes", "oidc:https://login.example.com#alice", oidcValue))).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.CallerSecret(ns, "ghost-notes", "notes", "serviceaccount:"+ns+"/ghost", "never-used"))).To(Succeed())

	imp := kubekit.NewImport(ns, "notes", remote.URL+"/mcp")
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, kubekit.OIDCGateway(ns, "gw", "notes"))).To(Succeed())

	importRef := ns + "/notes"
	saKey := adapterconfig.CallerKeyFileName(importRef, adapterconfig.ServiceAccountCaller(ns+"/agent", string(sa.UID)))
	oidcKey := adapterconfig.CallerKeyFileName(importRef, adapterconfig.OIDCCaller("https://login.example.com", "alice"))
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(Equal(map[string]string{saKey: saValue, oidcKey: oidcValue}))
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "gw"), 30*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionTrue, cantusv1alpha1.ReasonReconciled))
	gw, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gw")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gw).To(kubekit.HaveCondition(cantusv1alpha1.ConditionCallerCredentialsReady, metav1.ConditionTrue, cantusv1alpha1.ReasonCallerCredentialsReady))
	hash := gw.Status.ConfigHash
	onHost := filepath.Join(filesDir, ".imports", ns, "gw", "_caller-keys")
	g.Eventually(func() (string, error) { b, err := os.ReadFile(filepath.Join(onHost, saKey)); return string(b), err }).Should(Equal(saValue))

	got := &cantusv1alpha1.RemoteToolImport{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(imp), got)).To(Succeed())
	g.Expect(got.Status.CallerCredentials).To(Equal(&cantusv1alpha1.CallerCredentialsStatus{Mode: cantusv1alpha1.CallerCredentialsModePerCallerSecret, CallerSecrets: 3}))

	// A rotated key: the Secret and the local file follow, the config does not change.
	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: "agent-notes"}, s)).To(Succeed())
	s.Data["token"] = []byte(newValue)
	g.Expect(k8sClient.Update(ctx, s)).To(Succeed())
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(HaveKeyWithValue(saKey, newValue))
	g.Eventually(func() (string, error) { b, err := os.ReadFile(filepath.Join(onHost, saKey)); return string(b), err }).Should(Equal(newValue))
	g.Consistently(func() (string, error) {
		gw, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gw")()
		return gw.Status.ConfigHash, err
	}, 2*time.Second).Should(Equal(hash), "a changed per-caller key rolls nothing")

	// A recreated service account is a new caller: the old key goes, a new one comes.
	g.Expect(k8sClient.Delete(ctx, sa)).To(Succeed())
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(Equal(map[string]string{oidcKey: oidcValue}))
	g.Eventually(func() error { _, err := os.Stat(filepath.Join(onHost, saKey)); return err }).Should(MatchError(os.ErrNotExist))
	again := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
	g.Expect(k8sClient.Create(ctx, again)).To(Succeed())
	newKey := adapterconfig.CallerKeyFileName(importRef, adapterconfig.ServiceAccountCaller(ns+"/agent", string(again.UID)))
	g.Expect(newKey).NotTo(Equal(saKey))
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(Equal(map[string]string{newKey: newValue, oidcKey: oidcValue}))

	kubekit.ExpectNoValueInStatusOrEvents(t, k8sClient, ns, saValue, oidcValue, newValue)

	// A gateway that no longer serves the import keeps no caller's key.
	g.Expect(kubekit.Update(ctx, k8sClient, gw, func(gw *cantusv1alpha1.SkillServer) {
		gw.Spec.Imports = nil
		gw.Spec.Skills = []cantusv1alpha1.Skill{kubekit.TemplateSkill("hello", "hello {{ .title }}")}
	})).To(Succeed())
	g.Eventually(kubekit.SecretData(ctx, k8sClient, ns, render.CallerKeysSecretName("gw")), 30*time.Second).Should(BeEmpty())
	g.Eventually(func() ([]metav1.Condition, error) {
		gw, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gw")()
		return gw.Status.Conditions, err
	}, 30*time.Second).ShouldNot(ContainElement(HaveField("Type", cantusv1alpha1.ConditionCallerCredentialsReady)))
}

// A gateway whose callers have no identity cannot act for them at an import with
// callerCredentials: not Ready, CallerIdentityRequired, saying what to set. One whose
// exchange would ask for an audience it accepts itself is refused too.
func TestCallerCredentials_GatewayWithoutCallerIdentityIsNotReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	remote := remoteLibrary(t)

	imp := kubekit.NewImport(ns, "tickets", remote.URL+"/mcp")
	imp.Spec.CallerCredentials = &cantusv1alpha1.CallerCredentials{TokenExchange: &cantusv1alpha1.TokenExchange{
		TokenEndpoint: "http://127.0.0.1:9/token", ClientID: "gw", Audience: "gateway"}}
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())

	anonymous := kubekit.NewSkillServer(ns, "anonymous")
	anonymous.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "tickets"}}
	g.Expect(k8sClient.Create(ctx, anonymous)).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "anonymous"), 30*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonCallerIdentityRequired))
	ss, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "anonymous")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubekit.ConditionMessage(ss, cantusv1alpha1.ConditionReady)).To(And(ContainSubstring("spec.auth.serviceAccountTokens"), ContainSubstring("spec.auth.oidc")))

	// The exchange asks for "gateway", the audience this one accepts.
	g.Expect(k8sClient.Create(ctx, kubekit.OIDCGateway(ns, "passthrough", "tickets"))).To(Succeed())
	g.Eventually(kubekit.GetSkillServer(ctx, k8sClient, ns, "passthrough"), 30*time.Second).Should(kubekit.HaveCondition(cantusv1alpha1.ConditionReady, metav1.ConditionFalse, cantusv1alpha1.ReasonPassThroughAudience))
}
