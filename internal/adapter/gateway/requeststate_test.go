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
// sealed by one process does not open in another, nor in one with another key. A
// file of too short a key, of no key, or of too many keys is refused.
func TestRequestState_SharedKeyOpensAcrossReplicas(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name string, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	shared, other := keyFile("shared", "0123456789abcdef0123456789abcdef\n"), keyFile("other", "fedcba9876543210fedcba9876543210\n")
	replica := func() *Pool { return &Pool{relay: &relaySettings{states: newStateSealer()}} }
	one, two, three := replica(), replica(), replica()
	tool := sealerTool("team.confirm", "team/upstream")
	state, _ := one.relay.states.seal("s", "bearer", tool)
	if _, err := two.relay.states.open(state, "bearer", tool); !errors.Is(err, errStateForged) {
		t.Errorf("without a shared key: got %v, want the state refused", err)
	}
	for p, path := range map[*Pool]string{one: shared, two: shared, three: other} {
		if err := p.UseRequestStateKeyFile(path); err != nil {
			t.Fatal(err)
		}
	}
	state, _ = one.relay.states.seal("s", "bearer", tool)
	if _, err := three.relay.states.open(state, "bearer", tool); !errors.Is(err, errStateForged) {
		t.Errorf("with another key: got %v, want the state refused", err)
	}
	if remote, err := two.relay.states.open(state, "bearer", tool); err != nil || remote != "s" {
		t.Errorf("with a shared key: got %q %v, want the remote's state", remote, err)
	}
	for name, content := range map[string]string{
		"short": "short\n", "blank": "\n \n", "five": strings.Repeat("0123456789abcdef0123456789abcdef\n", MaxRequestStateKeys+1),
	} {
		if err := replica().UseRequestStateKeyFile(keyFile(name, content)); err == nil {
			t.Errorf("key file %s was accepted", name)
		}
	}
}

// A key file rewritten with a new key first and the old one after it (a rotation)
// is read again without a restart: new states are sealed with the new key, and states
// sealed with the old one still open, on a replica that read the file before and
// after. Once the old key is gone from the file, its states are refused.
func TestRequestState_RotatedKeyFileKeepsThePreviousKeyOpening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	write := func(lines ...string) {
		// As the kubelet and the local runtime do: a new file renamed over the old.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	oldKey, newKey := "old-key-0123456789abcdef0123456789abcdef", "new-key-0123456789abcdef0123456789abcdef"
	write(oldKey)
	sealer, opener := &Pool{relay: &relaySettings{states: newStateSealer()}}, &Pool{relay: &relaySettings{states: newStateSealer()}}
	for _, p := range []*Pool{sealer, opener} {
		if err := p.UseRequestStateKeyFile(path); err != nil {
			t.Fatal(err)
		}
	}
	tool := sealerTool("team.confirm", "team/upstream")
	before, _ := sealer.relay.states.seal("before", "bearer", tool)
	beforeToo, _ := sealer.relay.states.seal("before-too", "bearer", tool)
	write(newKey, oldKey)
	after, _ := sealer.relay.states.seal("after", "bearer", tool)
	if remote, err := opener.relay.states.open(before, "bearer", tool); err != nil || remote != "before" {
		t.Errorf("a state sealed before the rotation: got %q %v, want it opened with the previous key", remote, err)
	}
	if remote, err := opener.relay.states.open(after, "bearer", tool); err != nil || remote != "after" {
		t.Errorf("a state sealed after the rotation: got %q %v, want it opened", remote, err)
	}
	write(newKey)
	if _, err := opener.relay.states.open(beforeToo, "bearer", tool); !errors.Is(err, errStateForged) {
		t.Errorf("a state of a key dropped from the file: got %v, want it refused", err)
	}
	only := &Pool{relay: &relaySettings{states: newStateSealer()}}
	write(newKey)
	if err := only.UseRequestStateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	state, _ := sealer.relay.states.seal("again", "bearer", tool)
	if remote, err := only.relay.states.open(state, "bearer", tool); err != nil || remote != "again" {
		t.Errorf("the new key alone: got %q %v, want the state sealed after the rotation opened", remote, err)
	}
}
