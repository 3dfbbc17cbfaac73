package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// serverEverythingEntry is server-everything's launcher (`node ENTRY stdio|sse|streamableHttp`).
func serverEverythingEntry(t *testing.T) string {
	t.Helper()
	p := filepath.Join(peers.Dir(t), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("server-everything is not installed: %v", err)
	}
	return p
}

// bufferLogger collects log lines and prints them when the test failed.
func bufferLogger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	var lines []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() {
			t.Logf("runtime logs:\n%s", strings.Join(lines, "\n"))
		}
	})
	return funcr.NewJSON(func(obj string) {
		mu.Lock()
		lines = append(lines, obj)
		mu.Unlock()
	}, funcr.Options{})
}

// TestStdioBridgeServerEverything runs server-everything in stdio mode behind the real
// bridge (`adapter bridge`, started by the local runtime as the operator does) and checks
// what real clients see through it: the TypeScript SDK client lists the same tools, with
// input schemas equal as parsed JSON, as over server-everything's own streamable HTTP
// mode, and calls one; the operator's handshake (mcpclient.Probe) lists the same; the
// MCP conformance suite passes its server scenarios against the bridge, DNS-rebinding
// protection included. Forget stops the bridge.
func TestStdioBridgeServerEverything(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
	started := time.Now()
	local := workload.NewLocalBridges(peers.AdapterBinary(t), bufferLogger(t))
	t.Cleanup(func() { _ = local.Stop(context.Background()) })
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "e2e", Name: "everything"},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio: &cantusv1alpha1.StdioSource{
				Image:   "node:20", // not used by the local runtime
				Command: []string{peers.Node(t), serverEverythingEntry(t)},
				Args:    []string{"stdio"},
			},
		},
	}
	var url string
	var ready bool
	for deadline := time.Now().Add(20 * time.Second); !ready; {
		var err error
		if url, ready, err = local.Ensure(ctx, imp, workload.BridgeAccess{Token: bridgeToken}); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if !ready && time.Now().After(deadline) {
			t.Fatalf("the bridge at %s was not ready within 20s", url)
		}
	}
	t.Logf("bridge ready at %s after %s", url, time.Since(started).Round(time.Millisecond))

	// The bridge serves only callers with its token, as the operator's gateways are.
	auth := map[string]string{"Authorization": "Bearer " + bridgeToken}
	if _, err := peers.TryTSClient(t, ctx, peers.TSClientOptions{URL: url}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a client without the bridge's token: %v, want refused with 401", err)
	}
	viaBridge := peers.TSClient(t, ctx, peers.TSClientOptions{URL: url, Headers: auth, Call: "echo", Args: map[string]any{"message": "through the bridge"}})
	direct := peers.TSClient(t, ctx, peers.TSClientOptions{URL: peers.StartServerEverything(t, ctx, peers.TransportStreamableHTTP) + "/mcp"})

	if viaBridge.ServerInfo != direct.ServerInfo || viaBridge.ProtocolVersion != direct.ProtocolVersion {
		t.Errorf("through the bridge: %+v %s; directly: %+v %s",
			viaBridge.ServerInfo, viaBridge.ProtocolVersion, direct.ServerInfo, direct.ProtocolVersion)
	}
	if len(viaBridge.Tools) == 0 || strings.Join(viaBridge.ToolNames(), ",") != strings.Join(direct.ToolNames(), ",") {
		t.Fatalf("tools through the bridge %v, directly %v", viaBridge.ToolNames(), direct.ToolNames())
	}
	for i, tool := range viaBridge.Tools {
		want := direct.Tools[i]
		if !testkit.JSONEqual(t, tool.InputSchema, want.InputSchema) {
			t.Errorf("tool %s: inputSchema through the bridge %s, directly %s", tool.Name, tool.InputSchema, want.InputSchema)
		}
		got, _ := json.Marshal(tool)
		wantAll, _ := json.Marshal(want)
		if !testkit.JSONEqual(t, got, wantAll) {
			t.Errorf("tool %s differs through the bridge:\n%s\n%s", tool.Name, got, wantAll)
		}
	}
	if res := viaBridge.Result; res == nil || res.IsError || res.Text() != "Echo: through the bridge" {
		t.Errorf("echo through the bridge = %+v", res)
	}

	// The operator's own handshake through the bridge.
	probed, err := mcpclient.Probe(ctx, mcpclient.Options{URL: url, Headers: auth, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("mcpclient.Probe through the bridge: %v", err)
	}
	if probed.ServerName != direct.ServerInfo.Name || len(probed.Tools) != len(direct.Tools) {
		t.Errorf("probe: server %q with %d tools, want %q with %d", probed.ServerName, len(probed.Tools), direct.ServerInfo.Name, len(direct.Tools))
	}
	for i, tool := range probed.Tools {
		if i < len(direct.Tools) && (tool.Name != direct.Tools[i].Name || !testkit.JSONEqual(t, tool.InputSchema, direct.Tools[i].InputSchema)) {
			t.Errorf("probe tool %d: %s %s, want %s %s", i, tool.Name, tool.InputSchema, direct.Tools[i].Name, direct.Tools[i].InputSchema)
		}
	}
	t.Logf("%d tools equal through the bridge, TS SDK client and operator probe (%s so far)", len(probed.Tools), time.Since(started).Round(time.Millisecond))

	// The suite sends no headers of its own: a proxy beside it adds the token and passes
	// Host and Origin through, so that the DNS-rebinding checks still reach the bridge.
	withToken := tokenProxy(t, url, bridgeToken)
	for _, scenario := range []string{"server-initialize", "tools-list", "ping", "dns-rebinding-protection"} {
		checks := peers.RunConformance(t, ctx, withToken, scenario)
		// The bridge serves statelessly: with no session id there is none to check (INFO).
		peers.RequireChecksPassed(t, scenario, checks, "server-session-id-visible-ascii")
	}
	t.Logf("conformance scenarios passed (%s so far)", time.Since(started).Round(time.Millisecond))

	if err := local.Forget(ctx, types.NamespacedName{Namespace: "e2e", Name: "everything"}); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("the bridge still answers after Forget")
	}
}

// bridgeToken is the bridge's bearer token in these tests.
const bridgeToken = "e2eE2eE2eE2eE2eE2eE2eE2eE2eE2eE2eE2eE2eE2e"

// tokenProxy serves on loopback what target serves, adding the bridge's token to every
// request and keeping its Host and Origin.
func tokenProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	base := &url.URL{Scheme: u.Scheme, Host: u.Host}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(base)
		r.Out.Host = r.In.Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

var startedPID = regexp.MustCompile(`"msg":"stdio server started".*?"pid":(\d+)`)

// TestStdioBridgeCLI drives the real `adapter bridge` as a user (or a pod) would: it
// serves server-everything, stops gracefully on SIGTERM (exit 0, the child gone), copies
// itself with --install-to, reports a crashing command as mcp_remote_error, and refuses
// a missing command.
func TestStdioBridgeCLI(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
	bin := peers.AdapterBinary(t)

	t.Run("serve and SIGTERM", func(t *testing.T) {
		srv := peers.StartAdapterCommand(t, ctx, exec.Command(bin, "bridge", "--host", "127.0.0.1", "--port", "0", "--",
			peers.Node(t), serverEverythingEntry(t), "stdio"))
		out := peers.TSClient(t, ctx, peers.TSClientOptions{URL: srv.BaseURL + "/mcp"})
		if len(out.Tools) == 0 {
			t.Fatal("no tools through the bridge")
		}
		m := startedPID.FindStringSubmatch(srv.Logs())
		if m == nil {
			t.Fatalf("no 'stdio server started' log line with a pid:\n%s", srv.Logs())
		}
		child, _ := strconv.Atoi(m[1])
		res := srv.Stop()
		if res.ExitCode != 0 || res.Killed {
			t.Errorf("after SIGTERM: exit code %d, killed %v (took %s)", res.ExitCode, res.Killed, res.Took)
		}
		if err := syscall.Kill(child, 0); err == nil {
			t.Errorf("the stdio server (pid %d) outlived the bridge", child)
		}
		t.Logf("graceful stop took %s", res.Took.Round(time.Millisecond))
	})

	t.Run("install-to", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "adapter")
		out, err := exec.CommandContext(ctx, bin, "bridge", "--install-to", dst).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "installed "+dst {
			t.Fatalf("--install-to: %v %s", err, out)
		}
		if version, err := exec.CommandContext(ctx, dst, "version").Output(); err != nil || !strings.HasPrefix(string(version), "cantus-adapter ") {
			t.Errorf("the installed copy: %v %s", err, version)
		}
	})

	t.Run("crashing command", func(t *testing.T) {
		srv := peers.StartAdapterCommand(t, ctx, exec.Command(bin, "bridge", "--host", "127.0.0.1", "--port", "0",
			"--restart-backoff-initial", "10s", "--", peers.Node(t), "-e", "process.stderr.write('boom\\n'); process.exit(3)"))
		testkit.Eventually(t, testTimeout, "the crash to be noticed (/readyz 503, exit status 3 logged)", func() error {
			resp, err := http.Get(srv.BaseURL + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(srv.Logs(), "exit status 3") {
				return fmt.Errorf("/readyz %d; logs:\n%s", resp.StatusCode, srv.Logs())
			}
			return nil
		})
		_, err := peers.TryTSClient(t, ctx, peers.TSClientOptions{URL: srv.BaseURL + "/mcp", Timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "503") ||
			!strings.Contains(err.Error(), "mcp_remote_error: stdio server is not running (restarting in") {
			t.Errorf("TS client against a crashed command: %v", err)
		}
		if !strings.Contains(srv.Logs(), `"line":"boom"`) {
			t.Errorf("the command's stderr is not in the bridge's log:\n%s", srv.Logs())
		}
	})

	t.Run("usage", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, bin, "bridge", "--port", "0")
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "no command") {
			t.Errorf("bridge without a command: %v %s", err, out)
		}
	})
}
