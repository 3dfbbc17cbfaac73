package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func sealerTool(name, imp string) *Tool {
	return &Tool{Name: name, Backend: &adapterconfig.RemoteBackend{Import: imp}}
}

// A sealed state opens once for its caller and tool, giving the remote's state back;
// another caller, another tool, another import, an altered state, an expired one and a
// second use are each refused with their own reason.
func TestRequestState_OpensOnceForItsCallerAndTool(t *testing.T) {
	s := newStateSealer()
	tool := sealerTool("team.confirm", "team/upstream")
	seal := func() string {
		state, err := s.seal("remote-state", "serviceaccount:team/ada", tool)
		if err != nil {
			t.Fatal(err)
		}
		return state
	}
	state := seal()
	if strings.Contains(state, "remote-state") || strings.Contains(state, "ada") {
		t.Errorf("state %q shows the remote's state or the caller in clear", state)
	}
	for _, tc := range []struct {
		name   string
		state  string
		caller string
		tool   *Tool
		want   error
	}{
		{"another caller", state, "serviceaccount:team/bo", tool, errStateCaller},
		{"another tool", state, "serviceaccount:team/ada", sealerTool("team.echo", "team/upstream"), errStateTool},
		{"another import", state, "serviceaccount:team/ada", sealerTool("team.confirm", "team/other"), errStateTool},
		{"altered", strings.Replace(state, ".", ".x", 1), "serviceaccount:team/ada", tool, errStateForged},
		{"not ours", "cantus-relay.abc", "serviceaccount:team/ada", tool, errStateForged},
	} {
		if _, err := s.open(tc.state, tc.caller, tc.tool); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if remote, err := s.open(state, "serviceaccount:team/ada", tool); err != nil || remote != "remote-state" {
		t.Fatalf("open: %q %v, want the remote's state", remote, err)
	}
	if _, err := s.open(state, "serviceaccount:team/ada", tool); !errors.Is(err, errStateReplayed) {
		t.Errorf("second use: got %v, want it refused as replayed", err)
	}
	late := seal()
	s.now = func() time.Time { return time.Now().Add(requestStateTTL + time.Minute) }
	if _, err := s.open(late, "serviceaccount:team/ada", tool); !errors.Is(err, errStateExpired) {
		t.Errorf("after the expiry: got %v, want it refused as expired", err)
	}
}

// Replicas that read one key file open each other's states; without it, a state
// sealed by one process does not open in another.
func TestRequestState_SharedKeyOpensAcrossReplicas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := ReadRequestStateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	one, two := &Pool{relay: &relaySettings{states: newStateSealer()}}, &Pool{relay: &relaySettings{states: newStateSealer()}}
	tool := sealerTool("team.confirm", "team/upstream")
	state, _ := one.relay.states.seal("s", "bearer", tool)
	if _, err := two.relay.states.open(state, "bearer", tool); !errors.Is(err, errStateForged) {
		t.Errorf("without a shared key: got %v, want the state refused", err)
	}
	one.UseRequestStateKey(key)
	two.UseRequestStateKey(key)
	state, _ = one.relay.states.seal("s", "bearer", tool)
	if remote, err := two.relay.states.open(state, "bearer", tool); err != nil || remote != "s" {
		t.Errorf("with a shared key: got %q %v, want the remote's state", remote, err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRequestStateKey(path); err == nil {
		t.Error("a key of 5 bytes was accepted")
	}
}
