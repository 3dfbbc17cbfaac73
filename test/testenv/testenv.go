// Package testenv starts a real kube-apiserver and etcd (envtest) for integration tests.
// The binaries come from hack/envtest.sh, which builds them from the Go module proxy.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// RepoRoot is the folder holding go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find go.mod: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Scheme knows the built-in kinds and the cantus.dev kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := cantusv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Start starts a control plane with the CRDs installed. When KUBEBUILDER_ASSETS is not
// set it runs hack/envtest.sh (a no-op once the binaries are cached).
func Start() (*envtest.Environment, *rest.Config, error) {
	return StartWithAPIServerFlags(nil)
}

// StartWithAPIServerFlags is Start with extra kube-apiserver flags, such as a service
// range larger than envtest's default /24 for more than 250 Services.
func StartWithAPIServerFlags(flags map[string]string) (*envtest.Environment, *rest.Config, error) {
	return start(flags, nil, true)
}

// StartWithFlags is Start with extra kube-apiserver and etcd flags, such as a larger
// --quota-backend-bytes for a benchmark that stores more than etcd's default 2 GiB.
func StartWithFlags(apiServer, etcd map[string]string) (*envtest.Environment, *rest.Config, error) {
	return start(apiServer, etcd, true)
}

// StartWithoutCRDs starts a control plane without the cantus.dev CRDs, for tests that
// install them the way a user would (the Helm chart).
func StartWithoutCRDs() (*envtest.Environment, *rest.Config, error) {
	return start(nil, nil, false)
}

func start(flags, etcdFlags map[string]string, crds bool) (*envtest.Environment, *rest.Config, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if assets, err = buildAssets(root); err != nil {
			return nil, nil, err
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, Scheme: Scheme()}
	if crds {
		env.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	for name, value := range flags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	if len(etcdFlags) > 0 {
		env.ControlPlane.Etcd = &envtest.Etcd{}
		for name, value := range etcdFlags {
			env.ControlPlane.Etcd.Configure().Set(name, value)
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("start envtest with assets in %s: %w", assets, err)
	}
	return env, cfg, nil
}

func buildAssets(root string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "envtest.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/envtest.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}
