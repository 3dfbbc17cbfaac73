package adapter

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Sessions are bound to the caller that opened them. A session id carries a digest of
// its owner's identity (sessionIDFor), so any replica can tell, without shared state,
// whether the caller presenting an id is the one it was made for: a stolen id is
// useless to anyone else. The identity is the authenticated subject, the static token
// itself (by digest) for shared bearer tokens, or the client's address without auth.

// sessionIDPrefix is mcp-go's prefix of streamable HTTP session ids, kept so that the
// ids look as clients have seen them.
const sessionIDPrefix = "mcp-session-"

// sessionOwnerDomain separates the owner digest from any other use of SHA-256 over the
// same identity.
const sessionOwnerDomain = "cantus-session-owner\x00"

// ownerTagSize is the length of the owner digest in a session id (128 bits).
const ownerTagSize = 16

// headerSessionID is the streamable HTTP transport's session header.
const headerSessionID = "Mcp-Session-Id"

type sessionOwnerKey struct{}

// ownerTag is the digest of identity that a session id carries.
func ownerTag(identity string) string {
	sum := sha256.Sum256([]byte(sessionOwnerDomain + identity))
	return base64.RawURLEncoding.EncodeToString(sum[:ownerTagSize])
}

// sessionIDFor makes a new session id owned by identity: 128 random bits, then the
// owner's tag.
func sessionIDFor(identity string) string {
	var random [16]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never fails (Go 1.24+)
	return sessionIDPrefix + hex.EncodeToString(random[:]) + "." + ownerTag(identity)
}

// sessionOwnership is what a presented session id says about the caller presenting it.
type sessionOwnership int

const (
	sessionOwned   sessionOwnership = iota
	sessionForeign                  // made for another caller
	sessionUnknown                  // not an id this adapter makes
)

func ownershipOf(id, identity string) sessionOwnership {
	dot := strings.LastIndexByte(id, '.')
	if !strings.HasPrefix(id, sessionIDPrefix) || dot < 0 {
		return sessionUnknown
	}
	if subtle.ConstantTimeCompare([]byte(id[dot+1:]), []byte(ownerTag(identity))) != 1 {
		return sessionForeign
	}
	return sessionOwned
}

// identityFrom is the identity bindSessions put in ctx.
func identityFrom(ctx context.Context) string {
	id, _ := ctx.Value(sessionOwnerKey{}).(string)
	return id
}

// sessionsBound is true when a server configured by cfg has sessions to bind: stateful
// streamable HTTP, and sse (whose sessions are always stateful).
func sessionsBound(cfg *adapterconfig.Config) bool {
	return cfg.Transport == adapterconfig.TransportSSE || !cfg.Stateless
}

// bindSessions refuses a request that presents a session another caller opened, and
// hands the caller's identity on so that new sessions are made for it. It runs after
// authentication, so the identity is the verified one.
func bindSessions(next http.Handler, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		identity := admission.CallerIdentity(r)
		// An id this server never made is left to the transport, which answers it as
		// an unknown session (and, during shutdown, the gate refuses it first).
		if id := presentedSessionID(r); id != "" && ownershipOf(id, identity) == sessionForeign {
			log.Info("refused a request on another caller's session", "method", r.Method, "path", r.URL.Path)
			writeSessionRefusal(w, http.StatusForbidden,
				"session_forbidden: this session was opened by another caller; open your own session (initialize without a session id)")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionOwnerKey{}, identity)))
	})
}

// presentedSessionID is the session id r names: the header on streamable HTTP, the
// sessionId query parameter on sse's message endpoint.
func presentedSessionID(r *http.Request) string {
	if id := r.Header.Get(headerSessionID); id != "" {
		return id
	}
	if r.URL.Path == adapterconfig.PathMessage {
		return r.URL.Query().Get("sessionId")
	}
	return ""
}

// writeSessionRefusal answers with status and a JSON-RPC error, which MCP clients
// surface with its message.
func writeSessionRefusal(w http.ResponseWriter, status int, message string) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      nil,
		"error":   map[string]any{"code": -32001, "message": message},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// newSSESessionID is the sse transport's session id generator.
func newSSESessionID(ctx context.Context, _ *http.Request) (string, error) {
	identity := identityFrom(ctx)
	if identity == "" {
		return "", fmt.Errorf("no caller identity on the request: sessions cannot be bound")
	}
	return sessionIDFor(identity), nil
}

// boundSessionIDs makes and checks the streamable HTTP transport's session ids for the
// caller of each request, and remembers the ids terminated here (DELETE), so that a
// request on one is answered 404 as the spec asks. Ids are checked without shared
// state, so another replica does not know of a termination: it still takes the id.
type boundSessionIDs struct{ terminated *terminatedSessions }

// maxTerminatedSessions bounds the ids remembered. A caller can terminate ids it
// makes up (a session id is random bits and the caller's own tag), so the oldest go
// first: forgetting one lets its owner use a terminated id again, nothing more.
const maxTerminatedSessions = 16384

// terminatedSessions are the session ids terminated on this replica, most recent kept.
type terminatedSessions struct{ ids *lru.Cache[string, struct{}] }

func newTerminatedSessions() *terminatedSessions {
	ids, _ := lru.New[string, struct{}](maxTerminatedSessions) // errors only for a size <= 0
	return &terminatedSessions{ids: ids}
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver (mcp-go's name).
// mcp-go asks with no request when it closes or sweeps sessions itself.
//
//nolint:revive // the interface's spelling
func (b boundSessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil {
		return serverSessionIDs(b)
	}
	return ownerSessionIDs{identity: identityFrom(r.Context()), terminated: b.terminated}
}

// ownerSessionIDs are the session ids of one caller. Validate repeats bindSessions'
// check, so that a path around it still cannot use another caller's session.
type ownerSessionIDs struct {
	identity   string
	terminated *terminatedSessions
}

func (o ownerSessionIDs) Generate() string { return sessionIDFor(o.identity) }

func (o ownerSessionIDs) Validate(id string) (bool, error) {
	if o.identity == "" || ownershipOf(id, o.identity) != sessionOwned {
		return false, fmt.Errorf("session id is not this caller's")
	}
	return o.terminated.ids.Contains(id), nil
}

func (o ownerSessionIDs) Terminate(id string) (bool, error) {
	if _, err := o.Validate(id); err != nil {
		return false, err
	}
	o.terminated.ids.Add(id, struct{}{})
	return false, nil
}

// serverSessionIDs are what mcp-go's own closing of sessions (shutdown, idle sweep)
// terminates: any id, with no caller to check.
type serverSessionIDs boundSessionIDs

func (serverSessionIDs) Generate() string { return sessionIDFor("") }

func (s serverSessionIDs) Validate(id string) (bool, error) {
	return s.terminated.ids.Contains(id), nil
}

func (s serverSessionIDs) Terminate(id string) (bool, error) {
	s.terminated.ids.Add(id, struct{}{})
	return false, nil
}
