package admission

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// Head is the part of a JSON-RPC message the gate needs to decide.
type Head struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
}

// Message is what the gate reads of a JSON-RPC message: as mcp-go's server reads it
// (server.MCPServer.HandleMessage), with encoding/json, so that keys match whatever
// their case, the last of duplicate keys wins, and escapes ("tools\/call") are
// decoded. The limits rest on this reading, never on the raw bytes.
type Message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	// parsed is false for a body encoding/json refuses (mcp-go answers it a parse
	// error).
	parsed bool
}

// ReadMessage reads the message body; a body that does not parse gives what was read
// of it before the error.
func ReadMessage(body []byte) Message {
	var m Message
	m.parsed = len(body) > 0 && json.Unmarshal(body, &m) == nil
	return m
}

// Request says whether mcp-go may dispatch the message as a request: all but those its
// HandleMessage surely does not, notifications (no id, or null) and responses (a
// result). A body that does not parse counts as a request.
func (m Message) Request() bool {
	if !m.parsed {
		return true
	}
	notification := isJSONNull(m.ID)
	response := !isJSONNull(m.Result)
	return !notification && !response
}

// isJSONNull says whether raw is absent or null, as an `any` field would decode it (nil).
func isJSONNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// ParseHead parses the method and id of a JSON-RPC message. A body that does not parse
// (or none) gives the zero head; the MCP handler answers it, and it counts as a call
// meanwhile.
func ParseHead(body []byte) Head {
	var head Head
	if len(body) > 0 {
		_ = json.Unmarshal(body, &head)
	}
	return head
}

// RefuseBody answers a POST whose body could not be read.
func RefuseBody(w http.ResponseWriter, err error) {
	status := http.StatusRequestTimeout
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	http.Error(w, err.Error(), status)
}

// WriteRefusal answers 503 with a JSON-RPC error, and closes the connection so the
// client's retry goes through the Service to a ready replica.
func WriteRefusal(w http.ResponseWriter, id json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    -32000,
			"message": "server is shutting down: retry the request, another replica will take it",
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}
