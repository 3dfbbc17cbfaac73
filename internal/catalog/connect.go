package catalog

import (
	"context"
	"strings"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// ConnectInfo tells a caller of an imported tool in connect mode what to do before the
// tool works as them.
type ConnectInfo struct {
	// AuthorizationServer is where the user connects.
	AuthorizationServer string `json:"authorizationServer,omitempty"`
	// State is the viewing caller's account: Connected, NotConnected or ReconnectNeeded;
	// empty when it cannot be told (a caller that is not a service account).
	State string `json:"state,omitempty"`
	// StartPath is where connect links point, on the operator's connect base URL: a
	// caller gets its own link, valid once for 10 minutes, in the answer to its first
	// call of the tool.
	StartPath string `json:"startPath"`
	// DisconnectPath forgets the caller's account and revokes its token (POST, with the
	// caller's own token for the catalog's audience).
	DisconnectPath string `json:"disconnectPath"`
	// Note says what the link is.
	Note string `json:"note"`

	importRef string
}

// The states of ConnectInfo.State.
const (
	ConnectStateConnected       = "Connected"
	ConnectStateNotConnected    = "NotConnected"
	ConnectStateReconnectNeeded = "ReconnectNeeded"
)

// AccountStates says whether a caller ("serviceaccount:<ns>/<name>#<uid>") has a
// usable connected account for an import ("namespace/name"): one of the ConnectState
// constants.
type AccountStates interface {
	State(ctx context.Context, importRef, caller string) (string, error)
}

// connectCaller is a viewer that can name itself as a connect-mode caller.
type connectCaller interface {
	connectCaller() string
}

// connectCaller is the viewer's identity as a gateway names it, for service accounts.
func (v *viewer) connectCaller() string {
	if v == nil || v.user.UID == "" {
		return ""
	}
	namespace, name, ok := serviceAccountOf(v.user.Username)
	if !ok {
		return ""
	}
	return adapterconfig.ServiceAccountCaller(namespace+"/"+name, v.user.UID)
}

func connectServerOf(imp *cantusv1alpha1.RemoteToolImport) string {
	if s := imp.Status.CallerCredentials; s != nil {
		return s.AuthorizationServer
	}
	return imp.Spec.CallerCredentials.Connect.AuthorizationServer
}

func connectInfo(importRef, server string) *ConnectInfo {
	return &ConnectInfo{
		AuthorizationServer: server,
		StartPath:           adapterconfig.ConnectStartPath,
		DisconnectPath:      adapterconfig.ConnectDisconnect + "?import=" + importRef,
		importRef:           importRef,
		Note:                "the first call of the tool answers with a connect link for this caller; for a service account the link is a capability: whoever opens it links their account at the remote to that service account",
	}
}

// setConnectStates fills in the viewer's state of each connect-mode tool, asking once
// per import.
func (c *Catalog) setConnectStates(ctx context.Context, servers []Server, who Viewer) {
	cc, ok := who.(connectCaller)
	if c.Accounts == nil || !ok {
		return
	}
	caller := cc.connectCaller()
	if caller == "" {
		return
	}
	states := map[string]string{}
	for i := range servers {
		for j := range servers[i].Tools {
			t := &servers[i].Tools[j]
			if t.Connect == nil {
				continue
			}
			importRef := t.Connect.importRef
			state, seen := states[importRef]
			if !seen {
				state, _ = c.Accounts.State(ctx, importRef, caller)
				states[importRef] = state
			}
			t.Connect.State = state
		}
	}
}

// serviceAccountOf splits a service account's user name.
func serviceAccountOf(username string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(username, serviceAccountUserPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != ""
}
