// Package operatorpower checks what bounds the operator's own credentials, against a
// real API server (envtest): the admission policy of config/admission refuses a
// Deployment outside the restricted profile when the operator's service account writes
// it, and admits what the real manager binary renders; and the manager runs with
// --watch-namespaces on the namespaced Roles of config/rbac/namespaced alone.
package operatorpower

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The operator's identity as config/ deploys it: service account cantus-operator in
// cantus-system, the user the admission policy matches.
const (
	operatorNamespace = "cantus-system"
	operatorUser      = "system:serviceaccount:" + operatorNamespace + ":cantus-operator"
	// adapterImage is the one image the test's policy parameters allow as the adapter.
	adapterImage = "example.test/cantus/operator:v1"
	// bridgeImages are the images the test's policy parameters allow a stdio bridge to run.
	bridgeImages = "example.test/mcp"
)

var operatorGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"}

var (
	root       string
	adminCfg   *rest.Config
	admin      client.Client
	operator   client.Client
	kubeconfig string // an admin of the test's API server, for kubectl
	opConfig   string // the operator's service account (impersonated), for the manager
)

func TestMain(m *testing.M) {
	testenv.ExitUnderShort()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if root, err = testenv.RepoRoot(); err != nil {
		return 0, err
	}
	env, cfg, err := testenv.Start()
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	adminCfg = cfg
	if admin, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return 0, fmt.Errorf("admin client: %w", err)
	}
	if operator, err = client.New(operatorConfig(), client.Options{Scheme: testenv.Scheme()}); err != nil {
		return 0, fmt.Errorf("operator client: %w", err)
	}
	if kubeconfig, opConfig, err = writeKubeconfigs(env); err != nil {
		return 0, err
	}
	defer os.Remove(kubeconfig)
	defer os.Remove(opConfig)
	if err := installAdmissionPolicy(); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// operatorConfig acts as the operator's service account: the admin impersonates it, so
// that RBAC and admission see its user name and groups.
func operatorConfig() *rest.Config {
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser, Groups: operatorGroups}
	return cfg
}

// writeKubeconfigs writes an admin kubeconfig (kubectl) and one that impersonates the
// operator's service account (the manager binary).
func writeKubeconfigs(env *envtest.Environment) (string, string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "operatorpower-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", "", fmt.Errorf("add admin: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", "", fmt.Errorf("admin kubeconfig: %w", err)
	}
	adminFile, err := writeTemp("operatorpower-admin-*", data)
	if err != nil {
		return "", "", err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return "", "", fmt.Errorf("parse the admin kubeconfig: %w", err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = operatorUser, operatorGroups
	}
	opData, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", "", fmt.Errorf("operator kubeconfig: %w", err)
	}
	opFile, err := writeTemp("operatorpower-operator-*", opData)
	return adminFile, opFile, err
}

func writeTemp(pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("temp file: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// kubectl runs kubectl as the admin, stdin fed from in.
func kubectl(in []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// installAdmissionPolicy applies config/admission the way `make deploy` does (kubectl,
// server-side), with the test's adapter image as its parameter.
func installAdmissionPolicy() error {
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return fmt.Errorf("create %s: %w", operatorNamespace, err)
	}
	rendered, err := kubectl(nil, "kustomize", filepath.Join(root, "config", "admission"))
	if err != nil {
		return err
	}
	rendered = strings.ReplaceAll(rendered, "adapterImages: ghcr.io/cantus-dev/cantus-operator:dev", "adapterImages: "+adapterImage)
	if !strings.Contains(rendered, adapterImage) {
		return fmt.Errorf("config/admission no longer names the default adapter image as its parameter")
	}
	// The stdio bridges of the tests run images of example.test/mcp.
	rendered = strings.ReplaceAll(rendered, `bridgeImages: ""`, "bridgeImages: "+bridgeImages)
	if _, err := kubectl([]byte(rendered), "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	return nil
}
