package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// bridgeTokenEnv is where the bridge reads the token its clients must send.
const bridgeTokenEnv = "CANTUS_BRIDGE_TOKEN"

func postBridge(t *testing.T, url, authorization string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got)
}

// childrenOf lists the pids of a process's children (Linux).
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []string
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err == nil {
			out = append(out, strings.Fields(string(data))...)
		}
	}
	return out
}

// The bridge reads its token from CANTUS_BRIDGE_TOKEN: a request to /mcp without it, or
// with another, is refused with 401 before it reaches the stdio server; the health
// endpoints stay open for the kubelet; and the stdio command does not inherit the token
// (R8).
func TestBridgeRefusesRequestsWithoutItsToken(t *testing.T) {
	const token = "b5Jc1-g0o9Xb8y7S2Lk4mQzR6tW3vE1uN0pA9sD8fG7"
	t.Setenv(bridgeTokenEnv, token)
	p := startAdapter(t, "bridge", "--host", "127.0.0.1", "--port", "0", "--request-timeout", "2s", "--", "cat")
	url := p.baseURL + "/mcp"
	testkit.Eventually(t, testTimeout, "the bridge to be ready", func() error {
		if status, body := httpGet(t, p.baseURL+"/readyz"); status != http.StatusOK {
			return fmt.Errorf("/readyz answers %d %s", status, body)
		}
		return nil
	})

	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token[:len(token)-1], "Basic " + token, token} {
		if status, body := postBridge(t, url, auth); status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: HTTP %d %s, want 401", auth, status, body)
		} else if strings.Contains(body, token) {
			t.Errorf("the refusal shows the token: %s", body)
		}
	}
	if status, body := postBridge(t, url, "Bearer "+token); status != http.StatusOK {
		t.Errorf("with the token: HTTP %d %s, want 200", status, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := httpGet(t, p.baseURL+path); status != http.StatusOK {
			t.Errorf("GET %s without the token: HTTP %d %s, want 200", path, status, body)
		}
	}

	children := childrenOf(t, p.cmd.Process.Pid)
	if len(children) == 0 {
		t.Skip("cannot find the stdio command's process (no /proc here)")
	}
	for _, pid := range children {
		environ, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			t.Fatalf("read the stdio command's environment: %v", err)
		}
		if strings.Contains(string(environ), token) || strings.Contains(string(environ), bridgeTokenEnv) {
			t.Errorf("the stdio command (pid %s) inherited the bridge's token", pid)
		}
	}
}

// Listening on anything but loopback, the bridge needs a token: without one it would be
// an open MCP endpoint for every pod that can reach it (R8). It refuses to start.
func TestBridgeRefusesToServeTheClusterWithoutAToken(t *testing.T) {
	t.Setenv(bridgeTokenEnv, "")
	for name, env := range map[string][]string{
		"unset": withoutEnv(os.Environ(), bridgeTokenEnv),
		"empty": append(withoutEnv(os.Environ(), bridgeTokenEnv), bridgeTokenEnv+"="),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, adapterBinary(t), "bridge", "--host", "0.0.0.0", "--port", "0", "--", "cat")
			cmd.Env = env
			var stderr, stdout strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Start()
			if err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() {
				err = cmd.Wait()
				close(exited)
			}()
			select {
			case <-exited:
			case <-testkit.Context(t, testTimeout).Done(): // it would have refused at once
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("the bridge serves 0.0.0.0 without a token (stdout %q)", stdout.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != exitUsage {
				t.Errorf("exit code %d (%v) after %s, want %d", code, err, time.Since(start), exitUsage)
			}
			if !strings.Contains(stderr.String(), bridgeTokenEnv) {
				t.Errorf("stderr does not say what is missing: %s", stderr.String())
			}
		})
	}
}

func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
