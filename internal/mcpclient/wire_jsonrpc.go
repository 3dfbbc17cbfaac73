package mcpclient

import (
	"bytes"
	"encoding/json"
)

// Request is a JSON-RPC 2.0 request, or a notification when ID is nil.
type Request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// ErrorObject is the error member of a JSON-RPC 2.0 answer.
type ErrorObject struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Message is any JSON-RPC 2.0 message as read: an answer (Result or Error), or a
// request or notification of the server's (Method set).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *ErrorObject    `json:"error,omitempty"`
}

// EncodeRequest encodes request id calling method with params (nil for none).
func EncodeRequest(id int64, method string, params any) ([]byte, error) {
	return json.Marshal(Request{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
}

// Notification encodes a notification without params.
func Notification(method string) []byte {
	data, _ := json.Marshal(Request{JSONRPC: "2.0", Method: method})
	return data
}

// ParseMessages reads one JSON-RPC message or a batch (a JSON array of them). The
// error is encoding/json's.
func ParseMessages(data []byte) ([]Message, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var msgs []Message
		if err := json.Unmarshal(data, &msgs); err != nil {
			return nil, err
		}
		return msgs, nil
	}
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return []Message{m}, nil
}

// InitializeParams are the params of initialize: ProtocolVersion, the client
// capabilities named (each declared as an empty object, e.g. "elicitation"), and the
// client's name and version.
func InitializeParams(clientName, clientVersion string, capabilities ...string) map[string]any {
	declared := make(map[string]any, len(capabilities))
	for _, c := range capabilities {
		declared[c] = map[string]any{}
	}
	return map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    declared,
		"clientInfo":      map[string]any{"name": clientName, "version": clientVersion},
	}
}
