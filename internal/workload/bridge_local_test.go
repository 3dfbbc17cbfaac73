package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/stdioproxy/proxytest"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

func stdioImport(name string, command []string, args ...string) *cantusv1alpha1.RemoteToolImport {
	return &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: "ghcr.io/example/tools:1", Command: command, Args: args},
		},
	}
}

func childPID(t *testing.T, url string) int {
	t.Helper()
	var r struct{ PID int }
	a := proxytest.Post(t, url, proxytest.Request(1, "pid", nil), "Authorization", "Bearer "+testBridgeToken)
	if err := json.Unmarshal(a.Result, &r); err != nil || r.PID == 0 {
		t.Fatalf("pid through %s: %s", url, a.Raw)
	}
	return r.PID
}

func refused(url string) bool {
	resp, err := http.Post(url, "application/json", strings.NewReader(proxytest.Request(1, "pid", nil)))
	if err == nil {
		resp.Body.Close()
	}
	return err != nil
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestLocalEnsureForget drives the local runtime with a fake adapter (the test binary
// serving a stdioproxy bridge): Ensure starts a bridge process and returns its URL once
// ready; the same spec keeps it; changed args restart it; a dead bridge is started again;
// Forget and Stop stop bridges and their children.
func TestLocalEnsureForget(t *testing.T) {
	l := NewLocalBridges(proxytest.Path(fakeAdapterName), testr.New(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = l.Stop(context.Background()) })

	imp := stdioImport("fake", proxytest.FakeServerArgv(), "serve")
	url, ready, err := l.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken})
	if err != nil || !ready {
		t.Fatalf("Ensure = %q, %v, %v", url, ready, err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Errorf("url %q", url)
	}
	pid := childPID(t, url)

	// Unchanged spec: same bridge.
	if url2, ready, err := l.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken}); err != nil || !ready || url2 != url {
		t.Errorf("Ensure again = %q, %v, %v; want %q, ready", url2, ready, err, url)
	}

	// Changed args: a new bridge, the old one and its child gone.
	imp.Spec.Stdio.Args = []string{"serve", "--changed"}
	url3, ready, err := l.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken})
	if err != nil || !ready || url3 == url {
		t.Fatalf("Ensure after a spec change = %q, %v, %v", url3, ready, err)
	}
	if !refused(url) || alive(pid) {
		t.Errorf("the old bridge (%s) or its child (%d) still runs", url, pid)
	}

	// A bridge that died is started again.
	l.mu.Lock()
	proc := l.bridges[types.NamespacedName{Namespace: "team-a", Name: "fake"}].proc
	l.mu.Unlock()
	_ = proc.cmd.Process.Kill()
	<-proc.done
	url4, ready, err := l.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken})
	if err != nil || !ready || url4 == url3 {
		t.Fatalf("Ensure after the bridge died = %q, %v, %v", url4, ready, err)
	}
	pid4 := childPID(t, url4)

	// Another import, then Forget one and Stop the rest.
	other := stdioImport("other", proxytest.FakeServerArgv("serve"))
	otherURL, _, err := l.Ensure(ctx, other, BridgeAccess{Token: testBridgeToken})
	if err != nil {
		t.Fatal(err)
	}
	otherPID := childPID(t, otherURL)
	if err := l.Forget(ctx, types.NamespacedName{Namespace: "team-a", Name: "fake"}); err != nil {
		t.Fatal(err)
	}
	if !refused(url4) || alive(pid4) {
		t.Errorf("Forget left the bridge or its child running")
	}
	if refused(otherURL) {
		t.Errorf("Forget stopped another import's bridge")
	}

	runCtx, stopRun := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- l.Start(runCtx) }()
	stopRun()
	if err := testkit.Receive(t, 20*time.Second, "Start to return after its context ended", started); err != nil {
		t.Errorf("Start returned %v", err)
	}
	if !refused(otherURL) || alive(otherPID) {
		t.Errorf("Stop left a bridge or its child running")
	}
	if _, _, err := l.Ensure(ctx, other, BridgeAccess{Token: testBridgeToken}); err == nil {
		t.Errorf("Ensure after Stop succeeded")
	}
}

// TestLocalNotReady: a command that cannot run leaves the bridge up but not ready.
func TestLocalNotReady(t *testing.T) {
	l := NewLocalBridges(proxytest.Path(fakeAdapterName), testr.New(t))
	l.ReadyWait = 300 * time.Millisecond
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	url, ready, err := l.Ensure(context.Background(), stdioImport("broken", []string{filepath.Join(t.TempDir(), "missing")}), BridgeAccess{Token: testBridgeToken})
	if err != nil || ready || url == "" {
		t.Fatalf("Ensure = %q, %v, %v; want a URL, not ready, no error", url, ready, err)
	}
	a := proxytest.Post(t, url, proxytest.Request(1, "initialize", nil), "Authorization", "Bearer "+testBridgeToken)
	if a.Status != http.StatusServiceUnavailable || a.Error == nil ||
		!strings.HasPrefix(a.Error.Message, "mcp_remote_error: stdio server is not running (restarting in ") {
		t.Errorf("HTTP %d %s", a.Status, a.Raw)
	}
}

func TestLocalBadAdapter(t *testing.T) {
	l := NewLocalBridges(filepath.Join(t.TempDir(), "no-adapter"), testr.New(t))
	if _, _, err := l.Ensure(context.Background(), stdioImport("x", []string{"true"}), BridgeAccess{Token: testBridgeToken}); err == nil {
		t.Error("Ensure with a missing adapter binary succeeded")
	}
	noStdio := stdioImport("y", nil)
	noStdio.Spec.Stdio = nil
	if _, _, err := l.Ensure(context.Background(), noStdio, BridgeAccess{Token: testBridgeToken}); err == nil || !strings.Contains(err.Error(), "no stdio command") {
		t.Errorf("Ensure without stdio: %v", err)
	}
}

func TestLocalEnv(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
	t.Setenv("KUBECONFIG", "/root/.kube/config")
	t.Setenv("HTTPS_PROXY", "http://proxy:3128")
	env := strings.Join(localEnv(), "\n")
	if strings.Contains(env, "s3cr3t") || strings.Contains(env, "KUBECONFIG") {
		t.Errorf("the local bridge environment leaks the operator's: %s", env)
	}
	if !strings.Contains(env, "PATH=") || !strings.Contains(env, "HTTPS_PROXY=http://proxy:3128") {
		t.Errorf("the local bridge environment lacks PATH or the proxy: %s", env)
	}
}

// The stdio command of a local import runs with a scrubbed environment, read from the
// running child itself (/proc/PID/environ): the manager's credentials stay behind
// (issue 23 #12).
func TestLocalStdioChildSeesNoneOfTheManagersEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
	t.Setenv("KUBECONFIG", "/root/.kube/config")
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	l := NewLocalBridges(proxytest.Path(fakeAdapterName), testr.New(t))
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, ready, err := l.Ensure(ctx, stdioImport("env", proxytest.FakeServerArgv(), "serve"), BridgeAccess{Token: testBridgeToken})
	if err != nil || !ready {
		t.Fatalf("Ensure = %q, %v, %v", url, ready, err)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", childPID(t, url)))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	env := strings.ReplaceAll(string(environ), "\x00", "\n")
	for _, leaked := range []string{"s3cr3t", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", testBridgeToken} {
		if strings.Contains(env, leaked) {
			t.Errorf("the stdio child's environment holds %s:\n%s", leaked, env)
		}
	}
	if !strings.Contains(env, "PATH=") {
		t.Errorf("the stdio child's environment lacks PATH:\n%s", env)
	}
}

// A local bridge serves only callers with its token: every process of this host reaches
// 127.0.0.1. A new token restarts the bridge, and the old one no longer works (R8).
func TestLocalBridgeAdmitsOnlyItsToken(t *testing.T) {
	l := NewLocalBridges(proxytest.Path(fakeAdapterName), testr.New(t))
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	imp := stdioImport("tokened", proxytest.FakeServerArgv(), "serve")
	url, ready, err := l.Ensure(ctx, imp, BridgeAccess{Token: testBridgeToken})
	if err != nil || !ready {
		t.Fatalf("Ensure = %q, %v, %v", url, ready, err)
	}
	if a := proxytest.Post(t, url, proxytest.Request(1, "pid", nil)); a.Status != http.StatusUnauthorized {
		t.Errorf("without the token: HTTP %d %s, want 401", a.Status, a.Raw)
	}
	childPID(t, url)

	const renewed = "Qq1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0X1"
	url2, ready, err := l.Ensure(ctx, imp, BridgeAccess{Token: renewed})
	if err != nil || !ready || url2 == url {
		t.Fatalf("Ensure with a new token = %q, %v, %v; want a restarted bridge", url2, ready, err)
	}
	if a := proxytest.Post(t, url2, proxytest.Request(1, "pid", nil), "Authorization", "Bearer "+testBridgeToken); a.Status != http.StatusUnauthorized {
		t.Errorf("with the old token: HTTP %d %s, want 401", a.Status, a.Raw)
	}
	if a := proxytest.Post(t, url2, proxytest.Request(1, "pid", nil), "Authorization", "Bearer "+renewed); a.Status != http.StatusOK {
		t.Errorf("with the new token: HTTP %d %s, want 200", a.Status, a.Raw)
	}
	if _, _, err := l.Ensure(ctx, imp, BridgeAccess{}); err == nil {
		t.Error("Ensure without a token started an open bridge")
	}
}
