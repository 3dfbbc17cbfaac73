package testkit

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// CountingServer is an httptest.Server that counts every request it receives, and the
// GET streams it holds open: a GET counts once its answer's headers were flushed, which
// mcp-go does after it has registered the session for server-sent notifications.
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
		if r.Method == http.MethodGet {
			watched := &streamWatch{ResponseWriter: w, opened: &c.openStreams}
			defer watched.close()
			w = watched
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

// WaitStreamOpen waits until a GET stream is open at the server: a notification the
// server sends from then on reaches the client that opened it.
func (c *CountingServer) WaitStreamOpen(t testing.TB) {
	t.Helper()
	EventuallyTrue(t, 30*time.Second, "a GET stream open at the remote", func() bool { return c.openStreams.Load() > 0 })
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
