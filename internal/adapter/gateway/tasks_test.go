package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A task handle opens for its caller and tool as often as it is used, until the
// task's ttlMs (at most MaxTaskHandleTTL, which a task without ttlMs gets); another
// caller, another tool or import, and an altered handle are refused with their own
// reason; a request state is not a task handle, nor a handle's MAC a state's.
func TestTaskHandle_OpensForItsCallerUntilItExpires(t *testing.T) {
	s := newStateSealer()
	tool := sealerTool("work.job", "team/upstream")
	const ada = "serviceaccount:team/ada"
	minute := float64(time.Minute / time.Millisecond)
	handle, err := s.sealTask("remote-task-1", ada, tool, handleTTL(&minute))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if remote, err := s.openTask(handle, ada, tool); err != nil || remote != "remote-task-1" {
			t.Fatalf("open: %q %v, want the remote's taskId every time", remote, err)
		}
	}
	state, err := s.seal("remote-state", ada, tool)
	if err != nil {
		t.Fatal(err)
	}
	body, mac, _ := strings.Cut(strings.TrimPrefix(handle, taskHandlePrefix), ".")
	for _, tc := range []struct {
		name, handle, caller string
		tool                 *Tool
		want                 error
	}{
		{"another caller", handle, "serviceaccount:team/bo", tool, errTaskCaller},
		{"another tool", handle, ada, sealerTool("work.other", "team/upstream"), errTaskTool},
		{"another import", handle, ada, sealerTool("work.job", "team/other"), errTaskTool},
		{"altered", taskHandlePrefix + body + "x." + mac, ada, tool, errTaskForged},
		{"a request state", taskHandlePrefix + strings.TrimPrefix(state, requestStatePrefix), ada, tool, errTaskForged},
	} {
		if _, err := s.openTask(tc.handle, tc.caller, tc.tool); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := s.open(requestStatePrefix+body+"."+mac, ada, tool); !errors.Is(err, errStateForged) {
		t.Errorf("a handle as a request state: got %v, want it refused as forged", err)
	}
	s.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := s.openTask(handle, ada, tool); !errors.Is(err, errTaskExpired) {
		t.Errorf("after the task's ttlMs: got %v, want it expired", err)
	}
	week := float64(7 * 24 * time.Hour / time.Millisecond)
	for name, ttl := range map[string]*float64{"no ttlMs": nil, "a week": &week} {
		if got := handleTTL(ttl); got != MaxTaskHandleTTL {
			t.Errorf("%s: a handle good for %v, want %v", name, got, MaxTaskHandleTTL)
		}
	}
}

// A handle sealed before a key rotation opens while the previous key is kept beside
// the new one, and is refused as forged once the previous key is dropped.
func TestTaskHandle_OutlivesARotationOnlyWhileThePreviousKeyIsKept(t *testing.T) {
	s := newStateSealer()
	tool := sealerTool("work.job", "team/upstream")
	const ada = "serviceaccount:team/ada"
	handle, err := s.sealTask("remote-task-1", ada, tool, MaxTaskHandleTTL)
	if err != nil {
		t.Fatal(err)
	}
	previous := s.keys[0]
	s.keys = [][]byte{randomKey(), previous}
	if remote, err := s.openTask(handle, ada, tool); err != nil || remote != "remote-task-1" {
		t.Fatalf("with the previous key kept: %q %v, want the remote's taskId", remote, err)
	}
	s.keys = s.keys[:1]
	if _, err := s.openTask(handle, ada, tool); !errors.Is(err, errTaskForged) {
		t.Errorf("with the previous key dropped: got %v, want the handle refused", err)
	}
}
