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
// error is encoding/json's. The messages' ID, Params and Result share data's bytes,
// which the caller must not change afterwards: a result is often most of the message
// (a resource read's contents), and a gateway passes it on as is, so copying it would
// cost as much again for nothing.
func ParseMessages(data []byte) ([]Message, error) {
	data = bytes.TrimSpace(data)
	if m, ok := splitMessage(data); ok {
		return []Message{m}, nil
	}
	if len(data) > 0 && data[0] == '[' {
		var parsed []parsedMessage
		if err := json.Unmarshal(data, &parsed); err != nil {
			return nil, err
		}
		msgs := make([]Message, len(parsed))
		for i := range parsed {
			msgs[i] = parsed[i].message()
		}
		return msgs, nil
	}
	var m parsedMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return []Message{m.message()}, nil
}

// parsedMessage is a Message as ParseMessages decodes it, its raw members sharing the
// input's bytes.
type parsedMessage struct {
	JSONRPC string       `json:"jsonrpc"`
	ID      sharedRaw    `json:"id,omitempty"`
	Method  string       `json:"method,omitempty"`
	Params  sharedRaw    `json:"params,omitempty"`
	Result  sharedRaw    `json:"result,omitempty"`
	Error   *ErrorObject `json:"error,omitempty"`
}

func (p *parsedMessage) message() Message {
	return Message{JSONRPC: p.JSONRPC, ID: json.RawMessage(p.ID), Method: p.Method,
		Params: json.RawMessage(p.Params), Result: json.RawMessage(p.Result), Error: p.Error}
}

// sharedRaw is json.RawMessage without its copy: encoding/json hands UnmarshalJSON a
// slice of the input (already checked valid), which it keeps. A JSON null is kept as
// "null", as json.RawMessage keeps it.
type sharedRaw []byte

func (r *sharedRaw) UnmarshalJSON(data []byte) error {
	*r = data[:len(data):len(data)] // capped: an append to it must not write into the input
	return nil
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

// splitMessage is the common case of ParseMessages, one message, at a third of
// encoding/json's cost for a large one: encoding/json scans the input once to check it
// and again to decode it, byte by byte through its state machine, while here one check
// (validJSON) is followed by a walk over the members that jumps from quote to quote.
// Only the small members are decoded. ok is false, and the caller decodes data with
// encoding/json, for anything but a valid object whose member names are spelled
// plainly, one "error" at most: encoding/json also takes names in another case and
// names with escapes, and merges repeated objects.
func splitMessage(data []byte) (m Message, ok bool) {
	if len(data) == 0 || data[0] != '{' || !validJSON(data) {
		return Message{}, false
	}
	i := skipSpace(data, 1)
	for data[i] != '}' {
		nameEnd := skipString(data, i)
		name := data[i+1 : nameEnd-1]
		i = skipSpace(data, skipSpace(data, nameEnd)+1) // past the colon
		valueEnd := skipValue(data, i)
		if !m.setMember(name, data[i:valueEnd:valueEnd]) {
			return Message{}, false
		}
		i = skipSpace(data, valueEnd)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return m, true
}

// setMember sets the member name of m to value, and says whether splitMessage may go
// on (see there).
func (m *Message) setMember(name, value []byte) bool {
	switch string(name) {
	case "jsonrpc":
		return json.Unmarshal(value, &m.JSONRPC) == nil
	case "id":
		m.ID = value
	case "method":
		return json.Unmarshal(value, &m.Method) == nil
	case "params":
		m.Params = value
	case "result":
		m.Result = value
	case "error":
		if m.Error != nil {
			return false
		}
		return json.Unmarshal(value, &m.Error) == nil
	default:
		// Another member is ignored, as by encoding/json, unless encoding/json would
		// take it for one of the above.
		if bytes.IndexByte(name, '\\') >= 0 {
			return false
		}
		for _, known := range messageMembers {
			if bytes.EqualFold(name, []byte(known)) {
				return false
			}
		}
	}
	return true
}

// messageMembers are the members of a Message.
var messageMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// The skips below walk valid JSON (splitMessage checked it) and return the index after
// what they skip.

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString skips the string that starts at data[i], a quote. A quote ends it unless
// an odd number of backslashes precede it.
func skipString(data []byte, i int) int {
	for j := i + 1; ; {
		q := bytes.IndexByte(data[j:], '"') + j
		backslashes := 0
		for k := q - 1; k > i && data[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue skips the value that starts at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(data) && !endsLiteral(data[i]) {
			i++
		}
		return i
	}
}

func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
