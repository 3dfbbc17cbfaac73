package mcpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Transport is the HTTP transport of the MCP clients. Requests to an https URL go to
// net/http's Transport (HTTP/2 when the server offers it). Requests to an http URL
// run on the caller's goroutine over kept-alive HTTP/1.1 connections: net/http's
// Transport hands each request to a writer goroutine and each answer back from a
// reader goroutine, and a gateway makes one such request per call it forwards: doing
// without the hand-offs cut what a gateway adds to a call by about a sixth
// (docs/benchmarks.md). The request and the answer are written and parsed by
// net/http (Request.Write, ReadResponse); only the pool is kept here.
type Transport struct {
	https          *http.Transport
	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	idleTimeout    time.Duration
	maxIdlePerHost int

	mu    sync.Mutex
	idle  map[string][]*pooledConn // per host:port, the most recently used last
	sweep *time.Timer
}

// Limits of the plain-HTTP pool; net/http's Transport has the same for https.
const (
	maxResponseHeaderBytes = 64 << 10
	defaultMaxIdlePerHost  = 2
	defaultIdleTimeout     = 90 * time.Second
	// A server may send a few 1xx answers before the answer, not a stream of them.
	maxInformationalAnswers = 5
)

// errHeadersTooLarge is the answer's headers exceeding maxResponseHeaderBytes.
var errHeadersTooLarge = fmt.Errorf("the answer's headers are larger than %d bytes", maxResponseHeaderBytes)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return t.https.RoundTrip(req)
	}
	ctx := req.Context()
	addr := hostPort(req.URL)
	pc, err := t.conn(ctx, addr)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	// A cancelled or expired context ends a write or read in progress; the connection
	// is closed then, as its state is unknown.
	stop := context.AfterFunc(ctx, func() { _ = pc.SetDeadline(aLongTimeAgo) })
	resp, err := pc.exchange(req)
	if err != nil {
		stop()
		_ = pc.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, err
	}
	body := &pooledBody{body: resp.Body, t: t, pc: pc, addr: addr, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		// Nothing to read (202 Accepted to a notification): the connection is free now,
		// whether or not the caller reads the empty body.
		body.end()
		return resp, nil
	}
	resp.Body = body
	return resp, nil
}

// hostPort is the address of u's server, with the port http implies.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// aLongTimeAgo is a deadline that has passed: setting it ends blocked reads and writes.
var aLongTimeAgo = time.Unix(1, 0)

// closeRequestBody closes a request's body that will not be sent, as RoundTrip must.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// CloseIdleConnections closes the connections no request is using.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, conns := range idle {
		for _, pc := range conns {
			_ = pc.Close()
		}
	}
	t.https.CloseIdleConnections()
}

// conn returns a kept-alive connection to addr that the server has not closed, or a
// new one.
func (t *Transport) conn(ctx context.Context, addr string) (*pooledConn, error) {
	for {
		pc := t.takeIdle(addr)
		if pc == nil {
			break
		}
		if pc.usable(t.idleTimeout) {
			return pc, nil
		}
		_ = pc.Close()
	}
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &pooledConn{Conn: c}
	pc.limit = &limitedConnReader{r: c}
	pc.br = bufio.NewReader(pc.limit)
	pc.bw = bufio.NewWriter(c)
	return pc, nil
}

func (t *Transport) takeIdle(addr string) *pooledConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[addr]
	if len(conns) == 0 {
		return nil
	}
	pc := conns[len(conns)-1]
	conns[len(conns)-1] = nil
	t.idle[addr] = conns[:len(conns)-1]
	return pc
}

// putIdle keeps pc for the next request to addr, or closes it when the pool for addr
// is full.
func (t *Transport) putIdle(addr string, pc *pooledConn) {
	pc.idleSince = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle[addr]) >= t.maxIdlePerHost {
		_ = pc.Close()
		return
	}
	if t.idle == nil {
		t.idle = map[string][]*pooledConn{}
	}
	t.idle[addr] = append(t.idle[addr], pc)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout, t.closeExpired)
	}
}

// closeExpired closes the connections idle for longer than the idle timeout, so that a
// remote called once does not hold a socket open for good, and runs again while any
// connection is idle.
func (t *Transport) closeExpired() {
	var expired []*pooledConn
	t.mu.Lock()
	for addr, conns := range t.idle {
		kept := conns[:0]
		for _, pc := range conns {
			if time.Since(pc.idleSince) >= t.idleTimeout {
				expired = append(expired, pc)
			} else {
				kept = append(kept, pc)
			}
		}
		clear(conns[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = kept
		}
	}
	if len(t.idle) > 0 {
		t.sweep.Reset(t.idleTimeout)
	} else {
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, pc := range expired {
		_ = pc.Close()
	}
}

// pooledConn is one kept-alive HTTP/1.1 connection.
type pooledConn struct {
	net.Conn
	limit     *limitedConnReader
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// exchange writes req and reads the answer's status and headers; the body is read
// from the connection as the caller reads it.
func (pc *pooledConn) exchange(req *http.Request) (*http.Response, error) {
	if err := req.Write(pc.bw); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	for informational := 0; ; informational++ {
		if informational > maxInformationalAnswers {
			return nil, fmt.Errorf("the server sent more than %d informational answers (1xx)", maxInformationalAnswers)
		}
		pc.limit.allow(maxResponseHeaderBytes + int64(pc.br.Buffered()))
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			if pc.limit.exhausted() {
				return nil, errHeadersTooLarge
			}
			return nil, err
		}
		pc.limit.allow(-1)
		// An informational answer (100 Continue, 103 Early Hints) precedes the answer.
		if resp.StatusCode >= 100 && resp.StatusCode <= 199 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return resp, nil
	}
}

// usable is false for a connection idle for longer than idleTimeout, one the server
// closed while it was idle, and one with bytes nobody asked for: a server closes
// idle connections on its own, and a POST sent on such a connection cannot be
// retried, as the server may have read it.
func (pc *pooledConn) usable(idleTimeout time.Duration) bool {
	if time.Since(pc.idleSince) >= idleTimeout || pc.br.Buffered() > 0 {
		return false
	}
	sc, ok := pc.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		// Nothing to read is the only state of a healthy idle connection: no bytes
		// is the server's FIN, and a byte is one nobody asked for.
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(err, syscall.EAGAIN)
		return true
	})
	return err == nil && alive
}

// limitedConnReader reads from a connection, at most n bytes while n ≥ 0: it bounds
// the answer's headers, which ReadResponse would read without end.
type limitedConnReader struct {
	r io.Reader
	n int64
}

func (l *limitedConnReader) allow(n int64) { l.n = n }

func (l *limitedConnReader) exhausted() bool { return l.n == 0 }

func (l *limitedConnReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errHeadersTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// pooledBody is an answer's body on a pooled connection. Read to its end, it gives
// the connection back to the pool (unless either side said Connection: close or the
// request's context ended); closed before its end, it closes the connection, whose
// unread rest would otherwise be taken for the next answer.
type pooledBody struct {
	body  io.ReadCloser
	t     *Transport
	pc    *pooledConn
	addr  string
	stop  func() bool
	keep  bool
	ended atomic.Bool
}

func (b *pooledBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

// end gives the connection back once the answer was read to its end.
func (b *pooledBody) end() {
	if !b.ended.CompareAndSwap(false, true) {
		return
	}
	if b.stop() && b.keep {
		b.t.putIdle(b.addr, b.pc)
	} else {
		_ = b.pc.Close()
	}
}

func (b *pooledBody) Close() error {
	if b.ended.CompareAndSwap(false, true) {
		b.stop()
		return b.pc.Close()
	}
	return nil
}
