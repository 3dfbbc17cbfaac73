package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// managerBinary builds this command once per test binary.
func managerBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CANTUS_MANAGER_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The local runtime runs every tenant's adapters and stdio commands as the manager, so
// the real binary refuses it inside a cluster unless the admin says it is meant
// (issue 23 #12). Before, it started (and here failed only for the missing kubeconfig).
func TestLocalRuntimeIsRefusedInsideACluster(t *testing.T) {
	bin := managerBinary(t)
	run := func(inCluster bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--runtime=local", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		if inCluster {
			cmd.Env = append(cmd.Env, "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443")
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("the manager exited 0 without an API server:\n%s", out)
		}
		return string(out)
	}
	if out := run(true); !strings.Contains(out, "single-tenant") || !strings.Contains(out, "--allow-local-runtime-in-cluster") {
		t.Errorf("in a cluster, --runtime=local was not refused naming the flag:\n%s", out)
	}
	if out := run(true, "--allow-local-runtime-in-cluster"); strings.Contains(out, "single-tenant") {
		t.Errorf("--allow-local-runtime-in-cluster did not let the local runtime start:\n%s", out)
	}
	if out := run(false); strings.Contains(out, "single-tenant") {
		t.Errorf("outside a cluster, --runtime=local was refused:\n%s", out)
	}
}

// A mounted service-account token marks a pod too, also when the environment variable
// was removed.
func TestMountedTokenMeansInCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	token := filepath.Join(t.TempDir(), "token")
	old := inClusterTokenFile
	t.Cleanup(func() { inClusterTokenFile = old })
	inClusterTokenFile = token
	if err := checkLocalRuntime("local", false); err != nil {
		t.Fatalf("no token, no variable: %v", err)
	}
	if err := os.WriteFile(token, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkLocalRuntime("local", false); err == nil {
		t.Error("a mounted token did not refuse the local runtime")
	}
	if err := checkLocalRuntime("kubernetes", false); err != nil {
		t.Errorf("the kubernetes runtime was refused: %v", err)
	}
	if err := checkLocalRuntime("local", true); err != nil {
		t.Errorf("--allow-local-runtime-in-cluster did not allow it: %v", err)
	}
}
