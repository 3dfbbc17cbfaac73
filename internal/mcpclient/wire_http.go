package mcpclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/egress"
)

// TransportConfig is what the clients' HTTP transports differ in.
type TransportConfig struct {
	// CABundle (PEM), when set, is the only set of CAs TLS trusts.
	CABundle []byte
	// Dial, when set, makes every connection. Otherwise a net.Dialer with
	// DialTimeout (0: none) and a 30s keep-alive does.
	Dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	DialTimeout time.Duration
	// The http.Transport fields of the same names (0: net/http's default).
	IdleConnTimeout     time.Duration
	TLSHandshakeTimeout time.Duration
	MaxIdleConns        int
	MaxIdleConnsPerHost int
}

// ErrNoCertificate is NewTransport's error for a CA bundle without a certificate.
var ErrNoCertificate = egress.ErrNoCertificate

// NewTransport builds an HTTP transport for an MCP server: no proxy from the
// environment (the server is the address the caller named and, with Dial, checked),
// TLS 1.2 or newer, HTTP/2 when an https server offers it, and response headers of at
// most 64 KiB. Its only error is ErrNoCertificate.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cfg.CABundle) > 0 {
		pool, err := egress.CertPool(cfg.CABundle)
		if err != nil {
			return nil, err
		}
		tlsConfig.RootCAs = pool
	}
	t := &Transport{
		https: &http.Transport{
			Proxy:                  nil,
			DialContext:            dial,
			TLSClientConfig:        tlsConfig,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           cfg.MaxIdleConns,
			MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
			IdleConnTimeout:        cfg.IdleConnTimeout,
			TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
		},
		dial:           dial,
		idleTimeout:    cfg.IdleConnTimeout,
		maxIdlePerHost: cfg.MaxIdleConnsPerHost,
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = defaultIdleTimeout
	}
	if t.maxIdlePerHost <= 0 {
		t.maxIdlePerHost = defaultMaxIdlePerHost
	}
	return t, nil
}

// ParseEndpoint parses the URL of an MCP server: http or https, with a host and
// without credentials. The fragment is dropped. The error's text is a short detail
// that holds no part of the URL but its scheme.
func ParseEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("the URL does not parse")
	case u.User != nil:
		return nil, errors.New("the URL carries credentials: send them in a header instead")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("URL scheme %q: use http or https", clip.Line(u.Scheme, 20))
	case u.Hostname() == "":
		return nil, errors.New("the URL has no host")
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// CheckHeaders checks the configured headers: RFC 9110 field names, values without
// control characters. The error's text names the header, never its value.
func CheckHeaders(headers map[string]string) error {
	for name, value := range headers {
		if !ValidHeaderName(name) {
			return fmt.Errorf("header name %q is not a valid HTTP field name", clip.Line(name, 60))
		}
		if !ValidHeaderValue(value) {
			return fmt.Errorf("the value of header %s holds control characters", name)
		}
	}
	return nil
}

// ValidHeaderName reports whether name is an RFC 9110 field name.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether value holds no control character but tab.
func ValidHeaderValue(value string) bool {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ValidSessionID reports whether an Mcp-Session-Id holds only visible ASCII.
func ValidSessionID(id string) bool {
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// Headers are the transport's own headers of one request; empty ones are not sent.
type Headers struct {
	Accept          string
	SessionID       string // Mcp-Session-Id
	ProtocolVersion string // MCP-Protocol-Version
	LastEventID     string // Last-Event-ID, to resume an event stream
	UserAgent       string
	Method          string // Mcp-Method (protocol 2026-07-28)
	Name            string // Mcp-Name (protocol 2026-07-28), encoded already
	// Params are Mcp-Param-* headers (protocol 2026-07-28, a tool's x-mcp-header
	// parameters), encoded already; other names are not sent.
	Params map[string]string
}

// NewRequest builds a request to u: the configured headers first (nil for none), then
// h's, which a configured header cannot override, and Content-Type application/json
// when there is a body.
func NewRequest(ctx context.Context, method string, u *url.URL, body []byte, configured map[string]string, h Headers) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// u is parsed already; NewRequest would print it and parse it again.
	req, err := http.NewRequestWithContext(ctx, method, "/", rd)
	if err != nil {
		return nil, err
	}
	target := *u
	req.URL, req.Host = &target, u.Host
	// Every request of a gateway's calls passes here: the values share one backing
	// array, instead of one allocation per header.
	const own = 8
	values := make([]string, 0, len(configured)+own)
	header := make(http.Header, len(configured)+own)
	set := func(name, value string) {
		if value != "" {
			values = append(values, value)
			header[name] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	for name, value := range configured {
		set(http.CanonicalHeaderKey(name), value)
	}
	set("Accept", h.Accept)
	if body != nil {
		set("Content-Type", ContentTypeJSON)
	}
	set(HeaderSessionID, h.SessionID)
	set(canonicalProtocolVersion, h.ProtocolVersion)
	set(canonicalLastEventID, h.LastEventID)
	set("User-Agent", h.UserAgent)
	set(HeaderMethod, h.Method)
	set(HeaderName, h.Name)
	for name, value := range h.Params {
		if name = http.CanonicalHeaderKey(name); strings.HasPrefix(name, canonicalParamPrefix) && ValidHeaderName(name) && ValidHeaderValue(value) {
			set(name, value)
		}
	}
	req.Header = header
	return req, nil
}

// The canonical forms of the header names that are not spelled canonically, computed
// once.
var (
	canonicalProtocolVersion = http.CanonicalHeaderKey(HeaderProtocolVersion)
	canonicalLastEventID     = http.CanonicalHeaderKey(HeaderLastEventID)
	canonicalParamPrefix     = http.CanonicalHeaderKey("Mcp-Param-")
)

// MediaType is the media type of resp's Content-Type, "" when it has none (or one
// that does not parse).
func MediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

// errorBodyBytes is how much of an error answer is read, and of a body that is
// drained before its connection goes back to the pool.
const errorBodyBytes = 4 << 10

// ReadErrorBody reads the first 4 KiB of an error answer's body, for its message.
func ReadErrorBody(body io.Reader) []byte {
	data, _ := io.ReadAll(io.LimitReader(body, errorBodyBytes))
	return data
}

// DrainAndClose reads a little of body (so that its connection may be reused) and
// closes it.
func DrainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, errorBodyBytes))
	_ = body.Close()
}

// LimitedReader reads R, counting the bytes in N; once more than Max were read it
// fails with ErrTooLarge. Other errors are R's.
type LimitedReader struct {
	R      io.Reader
	N, Max int64
}

func (l *LimitedReader) Read(b []byte) (int, error) {
	if l.N > l.Max {
		return 0, ErrTooLarge
	}
	if rest := l.Max + 1 - l.N; int64(len(b)) > rest {
		b = b[:rest]
	}
	n, err := l.R.Read(b)
	l.N += int64(n)
	if l.N > l.Max {
		return n, ErrTooLarge
	}
	return n, err
}

// ReadBody reads resp's body, at most limit bytes (ErrTooLarge beyond), into a buffer
// of the announced length when there is one. An error says how many bytes had come.
func ReadBody(resp *http.Response, limit int64) ([]byte, error) {
	body := &LimitedReader{R: resp.Body, Max: limit}
	if resp.ContentLength <= 0 || resp.ContentLength > limit {
		return readUnannounced(body)
	}
	data := make([]byte, resp.ContentLength)
	if _, err := io.ReadFull(body, data); err != nil {
		return nil, &readError{err: err, n: body.N}
	}
	// Reading on to the body's end gives its connection back to the pool.
	_, _ = body.Read(make([]byte, 1))
	return data, nil
}

// readUnannounced reads a body of no announced length (chunked, as most servers send
// a large answer) into a buffer of its own length. It is read into a pooled buffer
// first: read straight into a growing slice, a 64 KiB body would allocate about twice
// its size on the way.
func readUnannounced(body *LimitedReader) ([]byte, error) {
	buf, _ := bodyBuffers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() {
		if buf.Cap() <= maxPooledBodyBuffer {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, &readError{err: err, n: body.N}
	}
	return bytes.Clone(buf.Bytes()), nil
}

// bodyBuffers are readUnannounced's buffers. One that grew beyond maxPooledBodyBuffer
// for a rare large body is left to the collector rather than kept.
var bodyBuffers sync.Pool

const maxPooledBodyBuffer = 1 << 20

// Origin is u's scheme and host: "https://host:8443".
func Origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// Path is u's path, "/" when empty; for messages (never the query, which may hold a
// key).
func Path(u *url.URL) string {
	if u.Path == "" {
		return "/"
	}
	return u.Path
}
