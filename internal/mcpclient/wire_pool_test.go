package mcpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// rawServer answers each request read on a connection with answer(conn, request
// number on that connection), written as is; it counts the connections it accepted,
// and reports on ended each connection the client closed.
type rawServer struct {
	url      string
	accepted atomic.Int32
	ended    chan struct{}
	// closed reports each connection the server closed (after its answer said nothing
	// of closing, as a server's idle timeout does).
	closed chan struct{}
}

func startRawServer(t *testing.T, answer func(c net.Conn, n int) (keepOpen bool)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s := &rawServer{url: "http://" + ln.Addr().String() + "/mcp", ended: make(chan struct{}, 100), closed: make(chan struct{}, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			go func() {
				defer func() {
					_ = c.Close()
					select {
					case s.closed <- struct{}{}:
					default: // nobody waits on more than the buffer holds
					}
				}()
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						s.ended <- struct{}{}
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if !answer(c, n) {
						return
					}
				}
			}()
		}
	}()
	return s
}

// answering answers every request with answer and keeps the connection open.
func answering(answer string) func(net.Conn, int) bool {
	return func(c net.Conn, _ int) bool {
		_, _ = io.WriteString(c, answer)
		return true
	}
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

func newTestTransport(t *testing.T, idle time.Duration) *Transport {
	t.Helper()
	tr, err := NewTransport(TransportConfig{IdleConnTimeout: idle, MaxIdleConnsPerHost: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// post sends a POST through tr and returns the answer's body.
func post(ctx context.Context, tr http.RoundTripper, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return "", err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return string(data), err
}

// mustRoundTrip sends a POST of body through tr and returns the answer, whose body
// the caller reads; the test ends it if the caller does not.
func mustRoundTrip(t *testing.T, tr http.RoundTripper, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// mustPost sends a POST through tr and fails the test unless the answer's body is want.
func mustPost(t *testing.T, tr http.RoundTripper, url, want, what string) {
	t.Helper()
	if body, err := post(context.Background(), tr, url); err != nil || body != want {
		t.Fatalf("%s: %q, %v; want %q", what, body, err, want)
	}
}

// wantConnections fails the test unless the server accepted n connections.
func (s *rawServer) wantConnections(t *testing.T, n int32, why string) {
	t.Helper()
	if got := s.accepted.Load(); got != n {
		t.Errorf("the server accepted %d connections, want %d: %s", got, n, why)
	}
}

func TestPoolKeepsConnectionsAlive(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, answering(okAnswer))
	tr := newTestTransport(t, time.Minute)
	for i := range 5 {
		mustPost(t, tr, srv.url, "{}", fmt.Sprintf("request %d", i))
	}
	srv.wantConnections(t, 1, "5 requests one after the other share one")
}

func TestPoolReusesTheConnectionOfAnEmptyAnswerClosedUnread(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, answering("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"))
	tr := newTestTransport(t, time.Minute)
	for i := range 3 {
		resp := mustRoundTrip(t, tr, srv.url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notification %d: HTTP %s", i, resp.Status)
		}
		_ = resp.Body.Close()
	}
	srv.wantConnections(t, 1, "3 notifications answered 202 without a body share one")
}

func TestPoolDialsAgainWhenTheServerClosedTheIdleConnection(t *testing.T) {
	t.Parallel()
	// The server answers one request per connection and closes it without saying
	// Connection: close, as a server does when its idle timeout strikes.
	srv := startRawServer(t, func(c net.Conn, _ int) bool { _, _ = io.WriteString(c, okAnswer); return false })
	tr := newTestTransport(t, time.Minute)
	for i := range 3 {
		if i > 0 {
			testkit.Receive(t, testBudget, "the server to close the connection it answered on", srv.closed)
		}
		mustPost(t, tr, srv.url, "{}", fmt.Sprintf("request %d after the server closed the kept connection", i))
	}
	srv.wantConnections(t, 3, "each request after the server closed the last connection")
}

func TestPoolDropsConnectionsAfterConnectionClose(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, func(c net.Conn, _ int) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
		return true // but keeps the connection open: the client must not reuse it
	})
	tr := newTestTransport(t, time.Minute)
	for i := range 2 {
		if _, err := post(context.Background(), tr, srv.url); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	srv.wantConnections(t, 2, "an answer with Connection: close ends its connection")
}

func TestPoolClosesIdleConnectionsAfterTheIdleTimeout(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, answering(okAnswer))
	tr := newTestTransport(t, 50*time.Millisecond)
	if _, err := post(context.Background(), tr, srv.url); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, testBudget, "the pool to close the idle connection after its 50ms idle timeout", srv.ended)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 || tr.sweep != nil {
		t.Errorf("the pool still holds %d hosts' connections (sweep armed: %v)", len(tr.idle), tr.sweep != nil)
	}
}

func TestPoolRefusesHugeHeaders(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, func(c net.Conn, _ int) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Filler: ")
		filler := strings.Repeat("a", 32<<10)
		for range 1 << 10 { // 32 MiB of one header unless the client stops reading
			if _, err := io.WriteString(c, filler); err != nil {
				return false
			}
		}
		return false
	})
	tr := newTestTransport(t, time.Minute)
	_, err := post(context.Background(), tr, srv.url)
	if !errors.Is(err, errHeadersTooLarge) {
		t.Fatalf("an answer with endless headers: %v, want %v", err, errHeadersTooLarge)
	}
}

func TestPoolCancelledRequestEndsPromptlyAndIsNotReused(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var held atomic.Bool
	srv := startRawServer(t, func(c net.Conn, _ int) bool {
		if held.CompareAndSwap(false, true) { // the first request only
			<-release // closed when the test ends
		}
		_, _ = io.WriteString(c, okAnswer)
		return true
	})
	defer close(release)
	tr := newTestTransport(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := post(ctx, tr, srv.url)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request whose context expired: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the expired request returned after %s", took)
	}
	mustPost(t, tr, srv.url, "{}", "the next request")
	srv.wantConnections(t, 2, "the interrupted connection is not reused")
}

func TestPoolBodyClosedEarlyClosesItsConnection(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, answering("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"))
	tr := newTestTransport(t, time.Minute)
	resp := mustRoundTrip(t, tr, srv.url, "{}")
	if _, err := resp.Body.Read(make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // 7 bytes unread: they must not become the next answer
	mustPost(t, tr, srv.url, "0123456789", "the request after a body closed early")
	srv.wantConnections(t, 2, "a body closed before its end ends its connection")
}

func TestPoolSkipsInformationalAnswers(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, func(c net.Conn, _ int) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+okAnswer)
		return true
	})
	tr := newTestTransport(t, time.Minute)
	mustPost(t, tr, srv.url, "{}", "an answer after 103")
}

func TestPoolRefusesEndlessInformationalAnswers(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, func(c net.Conn, _ int) bool {
		for range 1000 {
			if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"); err != nil {
				return false
			}
		}
		_, _ = io.WriteString(c, okAnswer)
		return false
	})
	tr := newTestTransport(t, time.Minute)
	if _, err := post(context.Background(), tr, srv.url); err == nil || !strings.Contains(err.Error(), "more than 5 informational answers") {
		t.Fatalf("an answer after 1,000 informational ones: %v, want a refusal", err)
	}
}

// TestPoolServesConcurrentRequests runs requests from many goroutines against a
// net/http server; with -race it checks the pool's locking.
func TestPoolServesConcurrentRequests(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = fmt.Fprint(w, r.URL.Query().Get("n"))
	}))
	t.Cleanup(srv.Close)
	tr := newTestTransport(t, time.Minute)
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			for i := range 50 {
				want := fmt.Sprint(g*1000 + i)
				body, err := post(context.Background(), tr, srv.URL+"/?n="+want)
				if err == nil && body != want {
					err = fmt.Errorf("answer %q to request %s", body, want)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadBodyReadsToTheEndAndKeepsTheLimit(t *testing.T) {
	t.Parallel()
	srv := startRawServer(t, answering(okAnswer))
	tr := newTestTransport(t, time.Minute)
	for i := range 3 {
		if data, err := ReadBody(mustRoundTrip(t, tr, srv.url, "{}"), 1024); err != nil || string(data) != "{}" {
			t.Fatalf("answer %d: %q, %v", i, data, err)
		}
	}
	srv.wantConnections(t, 1, "ReadBody reads on to the body's end, which gives the connection back")
	if _, err := ReadBody(mustRoundTrip(t, tr, srv.url, "{}"), 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a 2-byte answer with a 1-byte limit: %v, want ErrTooLarge", err)
	}
}
