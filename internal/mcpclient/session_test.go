package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

type incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// testBudget bounds each step of the package's own tests.
const testBudget = 10 * time.Second

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func result(id json.RawMessage, v any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": v}
}

var initResult = map[string]any{
	"protocolVersion": ProtocolVersion,
	"capabilities":    map[string]any{"tools": map[string]any{}},
	"serverInfo":      map[string]any{"name": "fake", "version": "1"},
}

const textResult = `{"content":[{"type":"text","text":"ok"}]}`

// fakeStreamable is a streamable HTTP server with session "s1" whose answer to
// tools/call is call's.
func fakeStreamable(t *testing.T, call http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m incoming
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			writeJSON(w, http.StatusOK, result(m.ID, initResult))
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "tools/call":
			if r.Header.Get("Mcp-Session-Id") != "s1" || r.Header.Get("MCP-Protocol-Version") != ProtocolVersion {
				http.Error(w, "missing session or protocol version", http.StatusTeapot)
				return
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			call(w, r)
		default:
			http.Error(w, "unexpected "+m.Method, http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func idOfBody(r *http.Request) json.RawMessage {
	var m incoming
	_ = json.NewDecoder(r.Body).Decode(&m)
	return m.ID
}

const secret = "Bearer sekret-value-123"

func connectTo(t *testing.T, url, transport string) *Session {
	t.Helper()
	c, err := New(ClientOptions{URL: url, Transport: transport, Headers: map[string]string{"Authorization": secret}, MaxMessageBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(testkit.Context(t, testBudget))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestCallTool_FailuresSayWhetherTheServerProcessedTheCall: each way a tools/call can
// fail is classified, and only refusals before processing are NotProcessed.
func TestCallTool_FailuresSayWhetherTheServerProcessedTheCall(t *testing.T) {
	for _, tc := range []struct {
		name          string
		answer        http.HandlerFunc
		reason        string
		notProcessed  bool
		sessionLost   bool
		detailContain string
	}{
		{"unknown session (404)", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "session not found", http.StatusNotFound)
		}, ReasonSessionLost, true, true, "no longer knows the session"},
		{"unknown session (400 naming it, as SDK servers answer)", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": nil,
				"error": map[string]any{"code": -32000, "message": "Bad Request: No valid session ID provided"}})
		}, ReasonSessionLost, true, true, "No valid session ID"},
		{"other 400", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad arguments", http.StatusBadRequest)
		}, ReasonHTTPError, false, false, "HTTP 400"},
		{"credentials refused", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusUnauthorized)
		}, ReasonUnauthorized, true, false, "refused the credentials"},
		{"500 echoing the header", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad token "+r.Header.Get("Authorization"), http.StatusInternalServerError)
		}, ReasonHTTPError, false, false, "[redacted]"},
		{"a draining cantus adapter", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"jsonrpc": "2.0", "id": nil,
				"error": map[string]any{"code": -32000, "message": "server is shutting down: retry the request, another replica will take it"}})
		}, ReasonSessionLost, true, true, "shutting down"},
		{"other 503", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream reset", http.StatusServiceUnavailable)
		}, ReasonHTTPError, false, false, "HTTP 503"},
		{"connection dropped after the request", func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := http.NewResponseController(w).Hijack()
			_ = conn.Close()
		}, ReasonConnectionDropped, false, false, "closed the connection"},
		{"answer over the size limit", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, result(idOfBody(r), map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("x", 2048)}}}))
		}, ReasonResponseTooLarge, false, false, "larger than 1024 bytes"},
		{"not JSON-RPC", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("<html>"))
		}, ReasonProtocolError, false, false, "is not JSON-RPC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := connectTo(t, fakeStreamable(t, tc.answer).URL+"/mcp", TransportStreamableHTTP)
			_, err := s.CallTool(testkit.Context(t, testBudget), "tool", json.RawMessage(`{"a":1}`))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("CallTool error %T %v, want *Error", err, err)
			}
			if e.Reason != tc.reason || e.NotProcessed != tc.notProcessed || e.SessionLost != tc.sessionLost {
				t.Errorf("got reason %s notProcessed %v sessionLost %v (%s), want %s %v %v",
					e.Reason, e.NotProcessed, e.SessionLost, e.Detail, tc.reason, tc.notProcessed, tc.sessionLost)
			}
			if !strings.Contains(e.Detail, tc.detailContain) || strings.Contains(e.Detail, "sekret-value") {
				t.Errorf("detail %q: want it to contain %q and no header value", e.Detail, tc.detailContain)
			}
			if s.Alive() == tc.sessionLost {
				t.Errorf("Alive = %v after a failure with sessionLost %v", s.Alive(), tc.sessionLost)
			}
		})
	}
}

// TestCallTool_Answers: a result passes through as sent, whether the answer is JSON or
// an event stream with a notification and a ping before it; a JSON-RPC error is an
// *RPCError with the header value scrubbed from its message.
func TestCallTool_Answers(t *testing.T) {
	var mode atomic.Value
	srv := fakeStreamable(t, func(w http.ResponseWriter, r *http.Request) {
		var m incoming
		_ = json.NewDecoder(r.Body).Decode(&m)
		switch mode.Load() {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, textResult)
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
			_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n")
			_, _ = fmt.Fprintf(w, "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", m.ID, textResult)
		case "rpc-error":
			writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID,
				"error": map[string]any{"code": -32602, "message": "unknown tool; you sent " + r.Header.Get("Authorization")}})
		}
	})
	pingAnswered := make(chan string, 1)
	// The client answers the server's ping with a POST of its own.
	wrapped := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"srv-1"`) {
				pingAnswered <- string(body)
				w.WriteHeader(http.StatusAccepted)
				return
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		wrapped.ServeHTTP(w, r)
	})
	s := connectTo(t, srv.URL+"/mcp", TransportStreamableHTTP)
	for _, m := range []string{"json", "sse"} {
		mode.Store(m)
		raw, err := s.CallTool(testkit.Context(t, testBudget), "tool", nil)
		if err != nil || string(raw) != textResult {
			t.Fatalf("%s answer: %s, %v; want %s", m, raw, err, textResult)
		}
	}
	if body := testkit.Receive(t, testBudget, "the client's answer to the server's ping", pingAnswered); !strings.Contains(body, `"result":{}`) {
		t.Errorf("ping answer %s has no empty result", body)
	}
	mode.Store("rpc-error")
	_, err := s.CallTool(testkit.Context(t, testBudget), "tool", nil)
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || strings.Contains(rpcErr.Message, "sekret-value") {
		t.Fatalf("JSON-RPC error answer = %v, want *RPCError -32602 without the header value", err)
	}
}

// TestConnect_UnreachableIsNotProcessed: a refused connection fails Connect as
// ConnectionRefused, NotProcessed.
func TestConnect_UnreachableIsNotProcessed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := New(ClientOptions{URL: "http://" + addr + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Connect(testkit.Context(t, testBudget))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonConnectionRefused || !e.NotProcessed {
		t.Fatalf("Connect = %v, want ConnectionRefused and NotProcessed", err)
	}
}

// TestRedirects_FollowedOnlyWithinTheOrigin: a 307 within the origin is followed (and
// later requests go where it led); one to another origin is not.
func TestRedirects_FollowedOnlyWithinTheOrigin(t *testing.T) {
	srv := fakeStreamable(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp2" {
			http.Error(w, "calls should go where initialize was redirected", http.StatusTeapot)
			return
		}
		writeJSON(w, http.StatusOK, result(idOfBody(r), json.RawMessage(textResult)))
	})
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			http.Redirect(w, r, "/mcp2", http.StatusTemporaryRedirect)
			return
		}
		inner.ServeHTTP(w, r)
	})
	s := connectTo(t, srv.URL+"/mcp", TransportStreamableHTTP)
	if raw, err := s.CallTool(testkit.Context(t, testBudget), "tool", nil); err != nil || string(raw) != textResult {
		t.Fatalf("call after a same-origin redirect: %s, %v", raw, err)
	}

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+"/mcp2", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(other.Close)
	c, _ := New(ClientOptions{URL: other.URL + "/mcp", Headers: map[string]string{"Authorization": secret}})
	_, err := c.Connect(testkit.Context(t, testBudget))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonHTTPError || !strings.Contains(e.Detail, "only within") {
		t.Fatalf("Connect through a cross-origin redirect = %v, want it refused", err)
	}
}

// fakeSSE is an HTTP+SSE server: GET /sse names /message as the endpoint and carries
// the answers; a tools/call makes it end the stream instead of answering.
func fakeSSE(t *testing.T) *httptest.Server {
	t.Helper()
	answers := make(chan string, 16)
	end := make(chan struct{})
	var endOnce sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprint(w, "event: endpoint\ndata: /message?sessionId=x\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case a := <-answers:
				_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", a)
				w.(http.Flusher).Flush()
			case <-end:
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /message", func(w http.ResponseWriter, r *http.Request) {
		var m incoming
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.WriteHeader(http.StatusAccepted)
		switch m.Method {
		case "initialize":
			b, _ := json.Marshal(result(m.ID, initResult))
			answers <- string(b)
		case "tools/call":
			endOnce.Do(func() { close(end) })
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		endOnce.Do(func() { close(end) })
		srv.Close()
	})
	return srv
}

// TestSSE_StreamEndFailsTheWaitingCall: over HTTP+SSE, a call whose answer never comes
// because the stream ended is SessionLost but not NotProcessed (it was delivered); the
// next call is refused before sending (NotProcessed).
func TestSSE_StreamEndFailsTheWaitingCall(t *testing.T) {
	s := connectTo(t, fakeSSE(t).URL+"/sse", TransportSSE)
	_, err := s.CallTool(testkit.Context(t, testBudget), "tool", nil)
	var e *Error
	if !errors.As(err, &e) || !e.SessionLost || e.NotProcessed {
		t.Fatalf("call when the stream ends = %v (%+v), want SessionLost and not NotProcessed", err, e)
	}
	if s.Alive() {
		t.Error("Alive after the stream ended")
	}
	_, err = s.CallTool(testkit.Context(t, testBudget), "tool", nil)
	if !errors.As(err, &e) || !e.NotProcessed {
		t.Fatalf("call on a lost session = %v, want NotProcessed", err)
	}
}

// TestConnect_RefusalWithAnHTTPStatus: a JSON-RPC error answered to initialize with a
// non-2xx status is the server refusing initialize, whatever the status.
func TestConnect_RefusalWithAnHTTPStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": idOfBody(r),
			"error": map[string]any{"code": -32602, "message": "Unsupported protocol version"}})
	}))
	t.Cleanup(srv.Close)
	c, err := New(ClientOptions{URL: srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Connect(testkit.Context(t, testBudget))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonInitializeFailed || !strings.Contains(e.Detail, "HTTP 400 Bad Request: -32602 Unsupported protocol version") {
		t.Fatalf("Connect = %v, want InitializeFailed naming the status and the error", err)
	}
}
