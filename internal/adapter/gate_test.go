package adapter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// gateProbe stands for mcp-go behind the gate: it records what a call would see (its
// context, after mcp-go's context hook) and holds the request until released.
type gateProbe struct {
	entered chan context.Context
	release chan struct{}
}

func (p *gateProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var buf [64]byte
	for {
		if _, err := r.Body.Read(buf[:]); err != nil {
			break
		}
	}
	p.entered <- callContext(r.Context(), r)
	<-p.release
}

func TestGate_CountsCallsNotStreamsAndRefusesWithTheID(t *testing.T) {
	s, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	probe := &gateProbe{entered: make(chan context.Context, 1), release: make(chan struct{})}
	h := s.gateMCP(probe)
	serve := func(method, body string) *httptest.ResponseRecorder {
		var r *http.Request
		if body == "" {
			r = httptest.NewRequest(method, adapterconfig.PathMCP, nil)
		} else {
			r = httptest.NewRequest(method, adapterconfig.PathMCP, strings.NewReader(body))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const (
		call   = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","arguments":{}}}`
		listen = `{"jsonrpc":"2.0","id":3,"method":"subscriptions\/listen","params":{}}`
	)

	// A call is counted once while it runs, and its context carries the admission
	// that Gate.Hold joins.
	done := make(chan struct{})
	go func() { serve(http.MethodPost, call); close(done) }()
	ctx := testkit.Receive(t, testTimeout, "the call to reach mcp-go", probe.entered)
	if n := s.gate.InFlight(); n != 1 {
		t.Errorf("in flight during a call = %d, want 1", n)
	}
	if a, ok := admission.From(ctx); !ok {
		t.Error("the call's context carries no admission")
	} else {
		held := s.gate.Hold(ctx)
		if held != a || s.gate.InFlight() != 1 {
			t.Errorf("Gate.Hold did not join the request's admission (in flight %d)", s.gate.InFlight())
		}
		held.Release()
	}
	probe.release <- struct{}{}
	testkit.Receive(t, testTimeout, "the call to finish", done)
	if n := s.gate.InFlight(); n != 0 {
		t.Errorf("in flight after the call = %d, want 0", n)
	}

	// Streams are not calls: GET, and subscriptions/listen however it is spelled.
	for _, stream := range []struct{ method, body string }{{http.MethodGet, ""}, {http.MethodPost, listen}} {
		done := make(chan struct{})
		go func() { serve(stream.method, stream.body); close(done) }()
		ctx := testkit.Receive(t, testTimeout, "the stream to open", probe.entered)
		if n := s.gate.InFlight(); n != 0 {
			t.Errorf("%s %s: in flight = %d, want 0", stream.method, stream.body, n)
		}
		if _, ok := admission.From(ctx); ok {
			t.Errorf("%s %s: a stream carries an admission", stream.method, stream.body)
		}
		probe.release <- struct{}{}
		testkit.Receive(t, testTimeout, "the stream to end", done)
	}

	// Refusing: 503 and a JSON-RPC error with the request's id.
	s.gate.RefuseNew()
	for _, tt := range []struct{ method, body, id string }{
		{http.MethodPost, call, `"id":7`},
		{http.MethodPost, listen, `"id":3`},
		{http.MethodGet, "", `"id":null`},
		{http.MethodPost, `not json`, `"id":null`},
	} {
		w := serve(tt.method, tt.body)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), tt.id) ||
			!strings.Contains(w.Body.String(), "shutting down") || w.Header().Get("Connection") != "close" {
			t.Errorf("%s %s while refusing = %d %s, want 503 with %s", tt.method, tt.body, w.Code, w.Body.String(), tt.id)
		}
	}
	// Ending a session is never refused.
	done = make(chan struct{})
	go func() { serve(http.MethodDelete, ""); close(done) }()
	testkit.Receive(t, testTimeout, "DELETE to pass the gate", probe.entered)
	probe.release <- struct{}{}
	testkit.Receive(t, testTimeout, "DELETE to finish", done)
}

func TestGate_BodyOverTheLimitIsRefused(t *testing.T) {
	s, err := NewServer(configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "x")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h := s.gateMCP(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("an oversized body reached mcp-go") }))
	for _, declared := range []bool{true, false} {
		r := httptest.NewRequest(http.MethodPost, adapterconfig.PathMCP, strings.NewReader(strings.Repeat(" ", maxMCPRequestBytes+1)))
		if !declared {
			r.ContentLength = -1 // chunked
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "read request body") {
			t.Errorf("declared length %v: %d %s, want 413", declared, w.Code, w.Body.String())
		}
	}
}
