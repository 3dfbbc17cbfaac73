package mcpclient

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestNewTransport(t *testing.T) {
	t.Parallel()
	tr, err := NewTransport(TransportConfig{IdleConnTimeout: time.Minute, MaxIdleConns: 8, MaxIdleConnsPerHost: 2, TLSHandshakeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	https := tr.https
	if https.Proxy != nil || !https.ForceAttemptHTTP2 || https.MaxResponseHeaderBytes != 64<<10 || https.TLSClientConfig.MinVersion != tls.VersionTLS12 ||
		https.TLSClientConfig.RootCAs != nil || https.IdleConnTimeout != time.Minute || https.MaxIdleConns != 8 || https.MaxIdleConnsPerHost != 2 ||
		https.TLSHandshakeTimeout != time.Second || https.DialContext == nil {
		t.Errorf("https transport settings: %+v", https)
	}
	if tr.idleTimeout != time.Minute || tr.maxIdlePerHost != 2 || tr.dial == nil {
		t.Errorf("plain-HTTP pool settings: idle timeout %s, %d idle per host", tr.idleTimeout, tr.maxIdlePerHost)
	}

	if _, err := NewTransport(TransportConfig{CABundle: []byte("not PEM")}); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("a CA bundle without a certificate: %v, want ErrNoCertificate", err)
	}

	// A CA bundle is the only trust; Dial makes every connection.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dialed := 0
	tr, err = NewTransport(TransportConfig{CABundle: bundle, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatalf("GET with the server's CA: %v", err)
	}
	DrainAndClose(resp.Body)
	if dialed != 1 {
		t.Errorf("Dial made %d connections, want 1", dialed)
	}
}

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	u, err := ParseEndpoint("https://example.com:8443/mcp?key=k#frag")
	if err != nil || u.String() != "https://example.com:8443/mcp?key=k" {
		t.Errorf("ParseEndpoint = %v, %v", u, err)
	}
	for raw, want := range map[string]string{
		"http://[::1":              "the URL does not parse",
		"https://user:pw@host/mcp": "the URL carries credentials: send them in a header instead",
		"ftp://host/mcp":           `URL scheme "ftp": use http or https`,
		"/relative":                `URL scheme "": use http or https`,
		"http:///mcp":              "the URL has no host",
	} {
		if _, err := ParseEndpoint(raw); err == nil || err.Error() != want {
			t.Errorf("ParseEndpoint(%q) = %v, want %q", raw, err, want)
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	t.Parallel()
	if err := CheckHeaders(map[string]string{"Authorization": "Bearer x\ty", "X-Key": ""}); err != nil {
		t.Errorf("valid headers: %v", err)
	}
	if err := CheckHeaders(map[string]string{"Bad Name": "v"}); err == nil || err.Error() != `header name "Bad Name" is not a valid HTTP field name` {
		t.Errorf("an invalid name: %v", err)
	}
	err := CheckHeaders(map[string]string{"X-Key": "secret\r\nInjected: 1"})
	if err == nil || err.Error() != "the value of header X-Key holds control characters" {
		t.Errorf("a value with CRLF: %v", err)
	}
	for name, want := range map[string]bool{"X-Ok_1.2~": true, "": false, "A:B": false, "Ä": false, "a\x7f": false} {
		if ValidHeaderName(name) != want {
			t.Errorf("ValidHeaderName(%q) = %v", name, !want)
		}
	}
	for id, want := range map[string]bool{"abc-123": true, "": true, "a b": false, "a\x7f": false, "é": false} {
		if ValidSessionID(id) != want {
			t.Errorf("ValidSessionID(%q) = %v", id, !want)
		}
	}
}

func TestNewRequest(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("http://example.com/mcp")
	configured := map[string]string{"Authorization": "Bearer t", "User-Agent": "theirs", "Mcp-Session-Id": "theirs"}
	req, err := NewRequest(context.Background(), http.MethodPost, u, []byte(`{}`), configured,
		Headers{Accept: AcceptAnswer, SessionID: "s1", ProtocolVersion: ProtocolVersion, LastEventID: "7", UserAgent: "cantus/1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"Authorization":        "Bearer t",
		"Accept":               "application/json, text/event-stream",
		"Content-Type":         "application/json",
		"Mcp-Session-Id":       "s1",
		"MCP-Protocol-Version": ProtocolVersion,
		"Last-Event-ID":        "7",
		"User-Agent":           "cantus/1",
	} {
		if got := req.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	body, _ := io.ReadAll(req.Body)
	if string(body) != "{}" {
		t.Errorf("body = %q", body)
	}

	req, err = NewRequest(context.Background(), http.MethodGet, u, nil, nil, Headers{UserAgent: "cantus/1"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Body != nil || len(req.Header) != 1 {
		t.Errorf("a GET without extras: body %v, headers %v", req.Body, req.Header)
	}
}

func TestLimitedReader(t *testing.T) {
	t.Parallel()
	data, err := io.ReadAll(&LimitedReader{R: strings.NewReader("12345"), Max: 5})
	if err != nil || string(data) != "12345" {
		t.Errorf("a body at the limit: %q, %v", data, err)
	}
	l := &LimitedReader{R: strings.NewReader("123456"), Max: 5}
	if _, err := io.ReadAll(l); !errors.Is(err, ErrTooLarge) || l.N != 6 {
		t.Errorf("a body over the limit: %v after %d bytes, want ErrTooLarge after 6", err, l.N)
	}
	if _, err := l.Read(make([]byte, 1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("reading on after the limit: %v", err)
	}
	failed := errors.New("reset")
	if _, err := io.ReadAll(&LimitedReader{R: io.MultiReader(strings.NewReader("12"), errReader{failed}), Max: 5}); !errors.Is(err, failed) {
		t.Errorf("the reader's own error: %v, want %v", err, failed)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestResponseHelpers(t *testing.T) {
	t.Parallel()
	resp := &http.Response{Header: http.Header{"Content-Type": {"Application/JSON; charset=utf-8"}}}
	if got := MediaType(resp); got != "application/json" {
		t.Errorf("MediaType = %q", got)
	}
	if got := MediaType(&http.Response{Header: http.Header{}}); got != "" {
		t.Errorf("MediaType without a Content-Type = %q", got)
	}
	if got := ReadErrorBody(strings.NewReader(strings.Repeat("x", 5<<10))); len(got) != 4<<10 {
		t.Errorf("ReadErrorBody read %d bytes, want 4 KiB", len(got))
	}
	u, _ := url.Parse("https://h:1?q=secret")
	if Origin(u) != "https://h:1" || Path(u) != "/" {
		t.Errorf("Origin, Path = %q, %q", Origin(u), Path(u))
	}
}
