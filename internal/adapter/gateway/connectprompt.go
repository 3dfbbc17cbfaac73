package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A caller who must connect an account (connect mode) is asked to, in the way its
// protocol allows:
//   - a caller of protocol 2026-07-28 that declared URL-mode elicitation gets an
//     input-required result holding one URL-mode elicitation; when it calls again
//     (after the user connected), the call goes through;
//   - an older caller that declared URL-mode elicitation gets the JSON-RPC error
//     URLElicitationRequiredError (-32042) carrying the URL: a stateful gateway reads
//     the declaration from the caller's session, a stateless one from what the caller
//     declared at its last initialize on this replica (Declared);
//   - any other caller gets a failed tool result beginning connect_required: that
//     carries the URL and says what to do.
// Reads and prompt gets of a connect-mode import answer a JSON-RPC error instead:
// -32042 with the URL (ForwardError.Unwrap, jsonrpc.ForwardFailure).

// ConnectPrompt is where, and until when, a caller's user connects an account.
type ConnectPrompt struct {
	URL     string
	Expires time.Time
	// Message is the operator's explanation for people (it quotes the URL); Ask is the
	// gateway's, without the URL, for an elicitation's message.
	Message string
	Ask     string
	// ServiceAccount is true when the caller is a service account: then the URL is a
	// capability (whoever opens it links their account to the caller), and says so.
	ServiceAccount bool
}

// connectElicitationKey names the input request of a connect prompt in an
// input-required result.
const connectElicitationKey = "connect"

// instructions say, for people, what to do with the URL. The URL comes last: the
// audit's and the traces' excerpts of a failed result stop well before it.
func (p *ConnectPrompt) instructions() string {
	var b strings.Builder
	b.WriteString("Open the URL below in a browser, sign in at the remote and allow access, then call again")
	if !p.Expires.IsZero() {
		fmt.Fprintf(&b, " (the URL works once, until %s)", p.Expires.UTC().Format("15:04 MST"))
	}
	b.WriteString(".")
	if p.ServiceAccount {
		b.WriteString(" Whoever opens it links their account to this service account: give it only to its owner.")
	}
	b.WriteString("\n" + p.URL)
	return b.String()
}

// elicitation is the URL-mode elicitation asking the user to connect: the client
// shows the URL apart from the message.
func (p *ConnectPrompt) elicitation(id string) mcp.ElicitationParams {
	return mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: p.Ask, URL: p.URL, ElicitationID: id}
}

// urlElicitationRequired is the error a handler returns for mcp-go to answer -32042
// with (older protocols). Its text holds no URL: mcp-go's error hooks may record it.
func urlElicitationRequired(ce *CallerCredentialError) error {
	required := mcp.URLElicitationRequiredError{Elicitations: []mcp.ElicitationParams{ce.Connect.elicitation(newElicitationID())}}
	return fmt.Errorf("%s: %s: %w", ce.Code, ce.Message, required)
}

// connectAsk is how the caller of ctx can be asked to open a URL.
type connectAsk int

const (
	askByToolError   connectAsk = iota // a failed tool result carrying the URL
	askByInputResult                   // 2026-07-28: an input-required result
	askByRPCError                      // older: URLElicitationRequiredError (-32042)
)

// connectAskOf says how the caller of ctx is asked to connect: by what it declared it
// supports, on its request (2026-07-28) or its session (older; none on a stateless
// gateway).
func connectAskOf(ctx context.Context) connectAsk {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		if declaresURLElicitation(info.ClientCapabilities) {
			return askByInputResult
		}
		return askByToolError
	}
	declared := false
	if memory := declaredFrom(ctx); memory != nil { // stateless: its request sessions hold nothing
		declared = memory.declaredURLElicitation(callerKeyOf(ctx))
	} else if session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		caps := session.GetClientCapabilities()
		declared = declaresURLElicitation(&caps)
	}
	if declared && failCall(ctx, nil) {
		return askByRPCError
	}
	return askByToolError
}

func declaresURLElicitation(caps *mcp.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// connectRequired answers a call of t whose caller must connect an account first.
func (t *Tool) connectRequired(ctx context.Context, ce *CallerCredentialError) *mcp.CallToolResult {
	text := ce.Error() + ". " + ce.Connect.instructions()
	switch connectAskOf(ctx) {
	case askByInputResult:
		id := newElicitationID()
		return &mcp.CallToolResult{
			Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
			MultiRoundTripResult: mcp.MultiRoundTripResult{
				InputRequests: mcp.InputRequests{connectElicitationKey: mcp.NewElicitationInputRequest(ce.Connect.elicitation(id))},
				RequestState:  connectState(callerOf(ctx), t.Name, id),
			},
		}
	case askByRPCError:
		failCall(ctx, urlElicitationRequired(ce))
	}
	// The result stands for the error where it replaces it (the audit and metrics see a
	// failed call).
	return mcp.NewToolResultError(text)
}

// connectRetry is a call that answers an input-required result asking to connect: its
// requestState is one connectRequired gave, to this caller for this tool. declined is
// true when the user declined or cancelled. A state that is not such a one (from
// another replica, whose key differs) is answered as a new call, which is as safe: the
// credential is always the one of the caller the call authenticates.
func (t *Tool) connectRetry(ctx context.Context, req mcp.CallToolRequest) (ours, declined bool) {
	state := req.Params.RequestState
	if !strings.HasPrefix(state, connectStatePrefix) {
		return false, false
	}
	if _, ok := checkConnectState(state, callerOf(ctx), t.Name); !ok {
		return true, false
	}
	answer, ok := req.Params.InputResponses[connectElicitationKey]
	if !ok || answer.DecodeFor(mcp.MethodElicitationCreate) != nil || answer.Elicitation == nil {
		return true, false
	}
	return true, answer.Elicitation.Action == mcp.ElicitationResponseActionDecline || answer.Elicitation.Action == mcp.ElicitationResponseActionCancel
}

// ---- requestState of a connect prompt ----

const connectStatePrefix = "cantus-connect."

// connectStateKey MACs the requestStates this process gives; another replica's do not
// verify here, and are then taken for new calls (see connectRetry).
var connectStateKey = func() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}()

// connectState binds the elicitation id to the caller and the tool.
func connectState(caller, tool, id string) string {
	return connectStatePrefix + id + "." + connectMAC(caller, tool, id)
}

func checkConnectState(state, caller, tool string) (string, bool) {
	id, mac, ok := strings.Cut(strings.TrimPrefix(state, connectStatePrefix), ".")
	if !ok || id == "" {
		return "", false
	}
	return id, hmac.Equal([]byte(mac), []byte(connectMAC(caller, tool, id)))
}

func connectMAC(caller, tool, id string) string {
	m := hmac.New(sha256.New, connectStateKey)
	m.Write([]byte(caller + "\x00" + tool + "\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

func newElicitationID() string { return randomToken(12) }

// ---- a call answered with a JSON-RPC error ----

// CallFailure is where a call of a gateway's tool leaves the JSON-RPC error it is to
// be answered with instead of its result (a tool handler of mcp-go returns both).
type CallFailure struct {
	mu  sync.Mutex
	err error
}

type callFailureKey struct{}

// WithCallFailure gives the call of ctx a CallFailure, which the server's tool handler
// returns to mcp-go.
func WithCallFailure(ctx context.Context) (context.Context, *CallFailure) {
	f := &CallFailure{}
	return context.WithValue(ctx, callFailureKey{}, f), f
}

// Err is the error the call is to be answered with; nil for its result.
func (f *CallFailure) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// failCall makes the call of ctx answer with err, and reports whether it can (a nil
// err only asks).
func failCall(ctx context.Context, err error) bool {
	f, _ := ctx.Value(callFailureKey{}).(*CallFailure)
	if f == nil {
		return false
	}
	if err != nil {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}
	return true
}
