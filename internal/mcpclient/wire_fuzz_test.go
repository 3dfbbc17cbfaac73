package mcpclient

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A remote controls every byte of an event stream: the reader never returns an event
// or line past its bound, and always ends (EOF, ErrTooLarge or another error).
func FuzzEventReaderIsBounded(f *testing.F) {
	for _, seed := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"id: 7\nretry: 1000\ndata: a\ndata: b\n\n: comment\n\n",
		"data: no end",
		"\r\n\r\ndata:\r\n\r\n",
		"retry: -5\nretry: 99999999999999999999\n\n",
		"data: " + string(bytes.Repeat([]byte("x"), 300)) + "\n\n",
	} {
		f.Add([]byte(seed))
	}
	const limit = 256
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := NewEventReader(bytes.NewReader(stream), limit)
		for range len(stream) + 2 {
			e, err := r.Next()
			if err != nil {
				return // EOF, ErrTooLarge or a read error: the stream ended
			}
			if int64(len(e.Data)+len(e.ID)+len(e.Type)) > limit {
				t.Fatalf("event of %d bytes past the %d byte bound", len(e.Data)+len(e.ID)+len(e.Type), limit)
			}
		}
		t.Fatalf("more events than bytes in a %d byte stream", len(stream))
	})
}

// Any bytes parse as JSON-RPC messages or fail with an error; what parses re-encodes.
func FuzzParseMessages(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`,
		`[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}},{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no"}}]`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":1e400,"message":""}}`,
		`[]`, ` `, `[`,
	} {
		f.Add([]byte(seed))
	}
	for _, seed := range parseMessagesCases {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
			wantParsedAsEncodingJSON(t, data)
		}
		msgs, err := ParseMessages(data)
		if err != nil {
			return
		}
		for _, m := range msgs {
			if _, err := EncodeRequest(1, m.Method, m.Params); err != nil && len(m.Params) > 0 {
				t.Fatalf("a parsed message's params do not re-encode: %v", err)
			}
		}
	})
}

// validJSON accepts exactly what json.Valid accepts.
func FuzzValidJSON(f *testing.F) {
	for _, seed := range append(validJSONCases, parseMessagesCases...) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %t, json.Valid %t", data, got, want)
		}
	})
}
