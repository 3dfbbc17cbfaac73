package gateway

import (
	"strings"
	"testing"
)

// A connect prompt's requestState verifies only for the caller and the tool it was
// given to, and not once altered.
func TestCallerCredentials_ConnectStateIsBoundToCallerAndTool(t *testing.T) {
	state := connectState("serviceaccount:team/ada#u1", "team.whoami", "elic-1")
	if !strings.HasPrefix(state, connectStatePrefix) {
		t.Fatalf("state %q lacks the prefix", state)
	}
	if id, ok := checkConnectState(state, "serviceaccount:team/ada#u1", "team.whoami"); !ok || id != "elic-1" {
		t.Errorf("its own caller and tool: %q, %v; want elic-1, true", id, ok)
	}
	for name, check := range map[string][3]string{
		"another caller":    {state, "serviceaccount:team/bo#u2", "team.whoami"},
		"another tool":      {state, "serviceaccount:team/ada#u1", "team.other"},
		"another id":        {strings.Replace(state, "elic-1", "elic-2", 1), "serviceaccount:team/ada#u1", "team.whoami"},
		"no MAC":            {connectStatePrefix + "elic-1", "serviceaccount:team/ada#u1", "team.whoami"},
		"another key's MAC": {connectStatePrefix + "elic-1.AAAAAAAAAAAAAAAAAAAAAAAA", "serviceaccount:team/ada#u1", "team.whoami"},
	} {
		if _, ok := checkConnectState(check[0], check[1], check[2]); ok {
			t.Errorf("%s: the state verified", name)
		}
	}
}
