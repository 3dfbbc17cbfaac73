//go:build cluster

package cluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The Helm chart, rendered for the image the node runs, is accepted by the node's API
// server (kubectl apply --dry-run=server): CRDs, RBAC, the manager and the catalog's
// Service, under the release name and in the namespace the README's install uses (a
// namespace of its own here: in cantus-system the dry run would meet make deploy's
// Deployment, whose selector (immutable) kustomize wrote differently).
// TestHelmReleaseInstallUpgradeUninstall installs, upgrades and uninstalls the chart for
// real, under another name, with make deploy's operator stopped.
func TestHelmChartAcceptedByTheNode(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(root, "bin", "helm")
	image := os.Getenv("IMG")
	if image == "" {
		image = "cantus.local/cantus-operator:dev"
	}
	repository, tag, _ := strings.Cut(image, ":")
	const namespace = "cantus-helm-dry-run"
	if out, err := exec.Command("kubectl", "--kubeconfig", kubeconfigPath(), "create", "namespace", namespace).CombinedOutput(); err != nil {
		t.Fatalf("create namespace %s: %v\n%s", namespace, err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("kubectl", "--kubeconfig", kubeconfigPath(), "delete", "namespace", namespace, "--wait=false").Run()
	})
	rendered, err := exec.Command(helm, "template", "cantus-operator", filepath.Join(root, "charts", "cantus-operator"),
		"-n", namespace, "--set", "image.repository="+repository+",image.tag="+tag+",image.pullPolicy=Never").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template (make bin/helm builds helm): %v\n%s", err, rendered)
	}
	apply := exec.Command("kubectl", "--kubeconfig", kubeconfigPath(), "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", "-")
	apply.Stdin = bytes.NewReader(rendered)
	out, err := apply.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/skillservers.cantus.dev", "clusterrole.rbac.authorization.k8s.io/cantus-operator", "deployment.apps/cantus-operator", "service/cantus-catalog"} {
		if !strings.Contains(string(out), want+" serverside-applied (server dry run)") {
			t.Errorf("%s was not applied:\n%s", want, out)
		}
	}
}
