package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// On the local runtime a gateway's adapter reads its request state keys from a file on
// the host that holds what the gateway's Secret holds, and follows a rotation without a
// new config; no key shows in a status or an event.
func TestRequestStateKeys_LocalRuntimeHandsTheKeysToTheAdapter(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	filesDir := startGatewayManager(t)
	remote := remoteLibrary(t)
	g.Expect(k8sClient.Create(ctx, kubekit.NewImport(ns, "notes", remote.URL+"/mcp"))).To(Succeed())
	readyGateway(t, ctx, ns, "gw", cantusv1alpha1.SkillImport{Name: "notes"})

	secret := &corev1.Secret{}
	keysOf := func() (string, error) {
		err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: render.RequestStateSecretName("gw")}, secret)
		return string(secret.Data[render.RequestStateKeysKey]), err
	}
	onHost := filepath.Join(filesDir, ".imports", ns, "gw", strings.TrimPrefix(render.RequestStateKeyFile, render.ImportFilesDir+"/"))
	hostKeys := func() (string, error) { b, err := os.ReadFile(onHost); return string(b), err }
	first, err := keysOf()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(first)).To(HaveLen(1))
	g.Eventually(hostKeys, 30*time.Second).Should(Equal(first))
	served, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gw")()
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(kubekit.Update(ctx, k8sClient, secret, func(secret *corev1.Secret) {
		secret.Annotations = map[string]string{cantusv1alpha1.AnnotationRotateRequestStateKey: "now"}
	})).To(Succeed())
	g.Eventually(func() ([]string, error) { s, err := keysOf(); return strings.Fields(s), err }, 30*time.Second).Should(HaveLen(2))
	rotated, _ := keysOf()
	g.Expect(strings.Fields(rotated)[0]).To(Equal(strings.TrimSpace(first)), "the current key seals until every pod has the new one")
	g.Eventually(hostKeys, 30*time.Second).Should(Equal(rotated))
	after, err := kubekit.GetSkillServer(ctx, k8sClient, ns, "gw")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Status.ConfigHash).To(Equal(served.Status.ConfigHash), "a rotated key changes no config")

	kubekit.ExpectNoValueInStatusOrEvents(t, k8sClient, ns, strings.Fields(rotated)...)
}
