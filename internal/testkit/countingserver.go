package testkit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// CountingServer is an httptest.Server that counts every request it receives, and the
// streams of server-sent notifications it holds open (GET streams, and the
// subscriptions/listen requests of protocol 2026-07-28): one counts once its answer's
// headers were flushed, which mcp-go does after it has registered the stream for
// notifications.
type CountingServer struct {
	*httptest.Server
	Requests    atomic.Int64
	openStreams atomic.Int64
}

// NewCountingServer serves h, counting, until the test ends.
func NewCountingServer(t testing.TB, h http.Handler) *CountingServer {
	c := &CountingServer{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Requests.Add(1)
		if r.Method == http.MethodGet || r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			watched := &streamWatch{ResponseWriter: w, opened: &c.openStreams}
			defer watched.close()
			w = watched
		}
		h.ServeHTTP(w, r)
	}))
	CloseAtEnd(t, c.Server)
	return c
}

// WaitStreamsOpen waits until n streams of notifications are open at the server: a
// notification the server sends from then on reaches the clients that opened them.
func (c *CountingServer) WaitStreamsOpen(t testing.TB, n int64) {
	t.Helper()
	EventuallyTrue(t, 30*time.Second, fmt.Sprintf("%d streams of notifications open at the remote", n), func() bool { return c.openStreams.Load() >= n })
}

// streamWatch counts its response in opened from its first Flush until close.
type streamWatch struct {
	http.ResponseWriter
	opened  *atomic.Int64
	flushed bool
}

func (s *streamWatch) Flush() {
	s.ResponseWriter.(http.Flusher).Flush()
	if !s.flushed {
		s.flushed = true
		s.opened.Add(1)
	}
}

func (s *streamWatch) close() {
	if s.flushed {
		s.opened.Add(-1)
	}
}

// Unwrap is the response s wraps, for http.ResponseController.
func (s *streamWatch) Unwrap() http.ResponseWriter { return s.ResponseWriter }
