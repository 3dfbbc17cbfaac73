// Package jsonrpc holds the JSON-RPC answers the adapter writes itself, before mcp-go (see
// content.Part.ServeRequest), and the outcomes its audit lines name.
package jsonrpc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
)

// MarkerNotAllowed starts the message of a refused read or get; it names neither the
// rules nor other callers.
const MarkerNotAllowed = "not_allowed: "

// ErrNotAllowed says the caller may not read or get what it named. On streamable HTTP
// the adapter answers such requests itself, with -32602 (see content.Part.ServeRequest);
// mcp-go answers a handler's error with -32603.
func ErrNotAllowed(what string) error {
	return errors.New(MarkerNotAllowed + what + " is not allowed for this caller; ask the owner of the server for access")
}

// ModernRequest is true for a request of protocol 2026-07-28 or later, which carries
// its protocol version in _meta instead of a session.
func ModernRequest(body []byte) bool {
	return bytes.Contains(body, []byte("io.modelcontextprotocol/protocolVersion"))
}

// Answer is a JSON-RPC response: Result or Error.
type Answer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	// status is the HTTP status Write answers with; 0 is 200.
	status int
}

// Error is the error of an Answer.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Data carries the URI an unknown-resource error is about (SEP-2164).
	Data any `json:"data,omitempty"`
}

// Write writes answer as the response, with HTTP 200 as JSON-RPC over HTTP answers
// (or the status the answer names).
func Write(w http.ResponseWriter, answer *Answer) {
	answer.JSONRPC = mcp.JSONRPC_VERSION
	body, err := json.Marshal(answer)
	if err != nil {
		body, _ = json.Marshal(Answer{JSONRPC: mcp.JSONRPC_VERSION, ID: answer.ID, Error: &Error{Code: mcp.INTERNAL_ERROR, Message: "encode the answer: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(cmp.Or(answer.status, http.StatusOK))
	_, _ = w.Write(body)
}

// InvalidParams is the -32602 answer saying message.
func InvalidParams(message string) *Answer {
	return &Answer{Error: &Error{Code: mcp.INVALID_PARAMS, Message: message}}
}

// Refused is the answer to a read or get of what the caller may not have.
func Refused(what string) *Answer { return InvalidParams(ErrNotAllowed(what).Error()) }

// WriteAnswer writes answer as the response to the request id.
func WriteAnswer(w http.ResponseWriter, id json.RawMessage, answer *Answer) {
	answer.ID = id
	Write(w, answer)
}

// ForwardFailure is the JSON-RPC error answering a read or get that failed: the
// remote's own error code and (scrubbed) message, URLElicitationRequiredError (-32042)
// for a caller who must connect an account first, or an internal error saying the
// remote was not reached.
func ForwardFailure(err error) *Answer {
	var fe *gateway.ForwardError
	if errors.As(err, &fe) && fe.RPC != nil {
		return &Answer{Error: &Error{Code: fe.RPC.Code, Message: fe.RPC.Message}, status: fe.Status}
	}
	if fe != nil && fe.Connect != nil {
		// The caller must connect an account first: the URL is in the data, as
		// URLElicitationRequiredError carries it, and in the message for people.
		return &Answer{Error: &Error{Code: mcp.URL_ELICITATION_REQUIRED, Message: fe.Message, Data: map[string]any{"elicitations": fe.Connect.Elicitations}}}
	}
	return &Answer{Error: &Error{Code: mcp.INTERNAL_ERROR, Message: err.Error()}}
}

// Outcomes of a call in the audit log.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeRefused = "refused"
	OutcomeBusy    = "busy"
)

// OutcomeOf is the outcome of a request that ended with err.
func OutcomeOf(err error) string {
	if err != nil {
		return OutcomeError
	}
	return OutcomeOK
}

// Markers that begin tool error results, so agents and logs can tell the failing part.
const (
	MarkerTemplateFailed = "template_call_failed: "
	MarkerHTTPFailed     = "http_call_failed: "
)

// ResultText is the text of a tool result, its text contents joined by newlines. It is
// the gateway's (which cannot import this package), so that both read a result alike.
func ResultText(r *mcp.CallToolResult) string {
	return gateway.ResultText(r)
}
