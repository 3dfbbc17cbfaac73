package mcpclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxRedirects bounds the redirects followed for one request.
const maxRedirects = 5

// Header names of the streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "MCP-Protocol-Version"
)

const (
	contentTypeJSON = "application/json"
	contentTypeSSE  = "text/event-stream"
)

func newProber(opts Options) (*prober, error) {
	p := &prober{opts: opts, secrets: secretsOf(opts.Headers)}
	p.url = &url.URL{Scheme: "http", Host: "invalid"} // for details of config errors
	o := &p.opts
	if o.Transport == "" {
		o.Transport = TransportStreamableHTTP
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxTools <= 0 {
		o.MaxTools = DefaultMaxTools
	}
	if o.Transport != TransportStreamableHTTP && o.Transport != TransportSSE {
		return nil, p.fail(ReasonInvalidConfig, fmt.Sprintf("transport %q: use %q or %q", clipText(o.Transport, 40), TransportStreamableHTTP, TransportSSE), nil)
	}
	u, err := url.Parse(o.URL)
	switch {
	case err != nil:
		return nil, p.fail(ReasonInvalidConfig, "the URL does not parse", nil)
	case u.User != nil:
		return nil, p.fail(ReasonInvalidConfig, "the URL carries credentials: send them in a header instead", nil)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, p.fail(ReasonInvalidConfig, fmt.Sprintf("URL scheme %q: use http or https", clipText(u.Scheme, 20)), nil)
	case u.Hostname() == "":
		return nil, p.fail(ReasonInvalidConfig, "the URL has no host", nil)
	}
	u.Fragment, u.RawFragment = "", ""
	p.url = u
	for name, value := range o.Headers {
		if !validHeaderName(name) {
			return nil, p.fail(ReasonInvalidConfig, fmt.Sprintf("header name %q is not a valid HTTP field name", clipText(name, 60)), nil)
		}
		if !validHeaderValue(value) {
			return nil, p.fail(ReasonInvalidConfig, fmt.Sprintf("the value of header %s holds control characters", name), nil)
		}
	}

	dial := o.Dial
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(o.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.CABundle) {
			return nil, p.fail(ReasonTLSError, "the CA bundle holds no PEM certificate", nil)
		}
		tlsConfig.RootCAs = pool
	}
	p.transport = &http.Transport{
		// No proxy from the environment: a proxy would connect to addresses the
		// caller's dialer never checked.
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        tlsConfig,
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: 64 << 10,
		IdleConnTimeout:        o.Timeout,
	}
	p.client = &http.Client{
		Transport: p.transport,
		// Redirects are followed by do, which asks CheckRedirect and keeps the method.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p, nil
}

// request is one HTTP exchange of the handshake.
type request struct {
	method string
	url    *url.URL
	body   []byte
	accept string
	// what the answer is, for details: "initialize", "tools/list", "the SSE stream".
	what string
	// session is the Mcp-Session-Id to send, "" for none.
	session string
	// lastEventID, when set, resumes an event stream (Last-Event-ID).
	lastEventID string
}

// op is "POST /mcp": the method and the path, never the query (it may hold a key).
func (r *request) op() string { return r.method + " " + pathOf(r.url) }

func pathOf(u *url.URL) string {
	if u.Path == "" {
		return "/"
	}
	return u.Path
}

// trusted reports whether the headers (which may be secrets) may go to target: the
// configured host, and no downgrade from https to http.
func (p *prober) trusted(target *url.URL) bool {
	if !strings.EqualFold(target.Hostname(), p.url.Hostname()) {
		return false
	}
	return !(p.url.Scheme == "https" && target.Scheme == "http")
}

// do sends r, following up to maxRedirects redirects itself: each target is checked
// with CheckRedirect before any connection to it, and the method and body are kept
// (307/308 semantics, also for 301/302; a 303 is refused since MCP needs a POST). It
// returns the response and the URL that answered. Errors are *Error.
func (p *prober) do(ctx context.Context, r *request) (*http.Response, *url.URL, error) {
	u := r.url
	for hop := 0; ; hop++ {
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
		if err != nil {
			return nil, u, p.fail(ReasonInvalidConfig, fmt.Sprintf("cannot build the request %s: %v", r.op(), err), err)
		}
		if p.trusted(u) {
			for name, value := range p.opts.Headers {
				req.Header.Set(name, value)
			}
			if r.session != "" {
				req.Header.Set(headerSessionID, r.session)
			}
		}
		if v := p.negotiatedVersion(); v != "" {
			req.Header.Set(headerProtocolVersion, v)
		}
		if r.accept != "" {
			req.Header.Set("Accept", r.accept)
		}
		if r.body != nil {
			req.Header.Set("Content-Type", contentTypeJSON)
		}
		if r.lastEventID != "" {
			req.Header.Set("Last-Event-ID", r.lastEventID)
		}
		req.Header.Set("User-Agent", ClientName+"/"+ClientVersion)

		resp, err := p.client.Do(req)
		if err != nil {
			step := r.what
			if r.method == http.MethodPost {
				step = "the answer to " + r.what
			}
			step += " from " + r.op()
			if u != r.url {
				step += " (after a redirect to " + u.Host + ")"
			}
			return nil, u, p.classify(ctx, err, step)
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
			http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return resp, u, nil
		}
		status := resp.Status
		loc := resp.Header.Get("Location")
		drainAndClose(resp.Body)
		from := r.method + " " + pathOf(u)
		if loc == "" {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s without a Location", status, from), nil)
		}
		next, err := u.Parse(loc)
		if err != nil {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s with a Location that does not parse", status, from), err)
		}
		next.Fragment, next.RawFragment = "", ""
		target := originOf(next) + pathOf(next)
		if next.Scheme != "http" && next.Scheme != "https" {
			return nil, u, p.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to a %s: URL refused: only http and https", from, clipText(next.Scheme, 20)), nil)
		}
		if next.User != nil {
			return nil, u, p.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to a URL with credentials refused", from), nil)
		}
		if resp.StatusCode == http.StatusSeeOther && r.method != http.MethodGet {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s to %s: a 303 turns the %s into a GET, which MCP cannot use", status, from, target, r.method), nil)
		}
		if hop >= maxRedirects {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("more than %d redirects, the last from %s to %s", maxRedirects, from, target), nil)
		}
		if p.opts.CheckRedirect != nil {
			if err := p.opts.CheckRedirect(next); err != nil {
				return nil, u, p.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to %s refused: %v", from, target, err), err)
			}
		}
		u = next
	}
}

func originOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

// statusError describes a non-2xx answer; a JSON-RPC error in its body (other than
// for 401/403) becomes an *rpcAnswerError so that initialize and tools/list failures
// keep their reasons.
func (p *prober) statusError(r *request, resp *http.Response, endpoint *url.URL) error {
	snippet, rpcErr := p.errorBody(resp)
	status := "HTTP " + resp.Status
	from := r.method + " " + pathOf(endpoint)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		detail := fmt.Sprintf("%s from %s: the server refused the credentials (check the headers)", status, from)
		if !p.trusted(endpoint) {
			detail += "; the headers were not sent because a redirect left " + p.url.Hostname()
		}
		return p.fail(ReasonUnauthorized, detail, nil)
	}
	if rpcErr != nil && (r.what == "initialize" || r.what == "tools/list") {
		return &rpcAnswerError{rpc: *rpcErr, status: status}
	}
	detail := fmt.Sprintf("%s from %s", status, from)
	if snippet != "" {
		detail += ": " + snippet
	}
	return p.fail(ReasonHTTPError, detail, nil)
}

// errorBody reads a little of an error response: a one-line text snippet, or the
// JSON-RPC error it holds.
func (p *prober) errorBody(resp *http.Response) (string, *rpcError) {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType == contentTypeJSON {
		var m rpcMessage
		if json.Unmarshal(data, &m) == nil && m.Error != nil {
			return "", m.Error
		}
	}
	if mediaType == "text/plain" || mediaType == contentTypeJSON {
		return clipText(string(bytes.ToValidUTF8(data, nil)), 120), nil
	}
	return "", nil
}

func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	_ = body.Close()
}

// limitedBody reads at most max bytes of a body, counting them; reading more fails
// with errTooLarge, any other failure is a *readError holding the count.
type limitedBody struct {
	r      io.Reader
	n, max int64
}

func (l *limitedBody) Read(b []byte) (int, error) {
	if l.n > l.max {
		return 0, &readError{err: errTooLarge, n: l.n}
	}
	if rest := l.max + 1 - l.n; int64(len(b)) > rest {
		b = b[:rest]
	}
	n, err := l.r.Read(b)
	l.n += int64(n)
	if l.n > l.max {
		return n, &readError{err: errTooLarge, n: l.n}
	}
	if err != nil && err != io.EOF {
		err = &readError{err: err, n: l.n}
	}
	return n, err
}

// ---- JSON-RPC ----

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

func (p *prober) newRequest(method string, params any) (int64, []byte) {
	id := p.nextID.Add(1)
	data, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	return id, data
}

func notification(method string) []byte {
	data, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method})
	return data
}

// matchAnswer looks for the answer to request id in one JSON message (an object or a
// batch). found=false means the message is something else (a notification, a request
// from the server, an answer to another id). An error is a message that is not
// JSON-RPC at all.
func (p *prober) matchAnswer(data []byte, id int64, step string) (result json.RawMessage, found bool, err error) {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		var v any
		jerr := json.Unmarshal(data, &v)
		return nil, false, p.fail(ReasonProtocolError, fmt.Sprintf("%s is not JSON: %s", step, jsonErrorText(jerr)), jerr)
	}
	var msgs []rpcMessage
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &msgs); err != nil {
			return nil, false, p.fail(ReasonProtocolError, fmt.Sprintf("%s is not JSON-RPC 2.0: %s", step, jsonErrorText(err)), err)
		}
	} else {
		var m rpcMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, false, p.fail(ReasonProtocolError, fmt.Sprintf("%s is not a JSON-RPC 2.0 message: %s", step, jsonErrorText(err)), err)
		}
		msgs = []rpcMessage{m}
	}
	for _, m := range msgs {
		if m.JSONRPC != "2.0" {
			return nil, false, p.fail(ReasonProtocolError, fmt.Sprintf("%s is not a JSON-RPC 2.0 message (no \"jsonrpc\":\"2.0\")", step), nil)
		}
		if m.Method != "" || !sameID(m.ID, id) {
			continue
		}
		if m.Error != nil {
			return nil, true, &rpcAnswerError{rpc: *m.Error}
		}
		if len(m.Result) == 0 || string(m.Result) == "null" {
			return nil, true, p.fail(ReasonProtocolError, fmt.Sprintf("%s has neither a result nor an error", step), nil)
		}
		return m.Result, true, nil
	}
	return nil, false, nil
}

func sameID(raw json.RawMessage, id int64) bool {
	want := strconv.FormatInt(id, 10)
	s := string(bytes.TrimSpace(raw))
	return s == want || s == `"`+want+`"`
}

// ---- streamable HTTP ----

type streamableSession struct {
	p         *prober
	endpoint  *url.URL
	sessionID string
}

func (s *streamableSession) post(ctx context.Context, what string, body []byte) (*http.Response, *request, error) {
	r := &request{method: http.MethodPost, url: s.endpoint, body: body, accept: contentTypeJSON + ", " + contentTypeSSE,
		what: what, session: s.sessionID}
	resp, final, err := s.p.do(ctx, r)
	if err != nil {
		return nil, r, err
	}
	// Later requests go straight to where the redirects led.
	s.endpoint = final
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer drainAndClose(resp.Body)
		return nil, r, s.p.statusError(r, resp, final)
	}
	return resp, r, nil
}

func (s *streamableSession) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, body := s.p.newRequest(method, params)
	resp, r, err := s.post(ctx, method, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if method == "initialize" {
		if sid := resp.Header.Get(headerSessionID); sid != "" {
			if !validSessionID(sid) {
				return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("the %s header of the answer to initialize holds characters other than visible ASCII", headerSessionID), nil)
			}
			s.sessionID = sid
		}
	}
	step := "the answer to " + method + " from " + r.method + " " + pathOf(s.endpoint)
	body2 := &limitedBody{r: resp.Body, max: s.p.opts.MaxMessageBytes}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case contentTypeJSON:
		data, err := io.ReadAll(body2)
		if err != nil {
			return nil, s.p.classify(ctx, err, step)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("%s is empty (HTTP %s)", step, resp.Status), nil)
		}
		result, found, err := s.p.matchAnswer(data, id, step)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("%s holds no JSON-RPC answer to request %d", step, id), nil)
		}
		return result, nil
	case contentTypeSSE:
		return s.readStream(ctx, resp.Body, body2, id, method, step)
	case "":
		return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("%s (HTTP %s) has no Content-Type: want %s or %s", step, resp.Status, contentTypeJSON, contentTypeSSE), nil)
	default:
		return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("%s has Content-Type %s, not %s or %s: is this an MCP endpoint?",
			step, clipText(mediaType, 60), contentTypeJSON, contentTypeSSE), nil)
	}
}

// maxResumes bounds how often one answer's event stream is resumed.
const maxResumes = 3

// maxRetryWait caps the reconnection delay a server may ask for.
const maxRetryWait = 5 * time.Second

// readStream reads the answer to request id from an event stream. A stream that ends
// cleanly before the answer, after an event with an id, is resumed as the 2025-11-25
// transport describes (SEP-1699): after the server's retry delay, GET the endpoint
// with Last-Event-ID and read on there.
func (s *streamableSession) readStream(ctx context.Context, first io.ReadCloser, body io.Reader, id int64, method, step string) (json.RawMessage, error) {
	events := newSSEReader(body, s.p.opts.MaxMessageBytes)
	var resumed io.ReadCloser
	defer func() {
		if resumed != nil {
			_ = resumed.Close()
		}
	}()
	for resumes := 0; ; {
		ev, err := events.next()
		if err == io.EOF {
			if events.lastID == "" || resumes >= maxResumes {
				detail := fmt.Sprintf("the event stream of POST %s ended without the answer to %s", pathOf(s.endpoint), method)
				if resumes > 0 {
					detail += fmt.Sprintf(" (resumed %d times)", resumes)
				}
				return nil, s.p.fail(ReasonConnectionDropped, detail, err)
			}
			resumes++
			wait := min(events.retry, maxRetryWait)
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, s.p.classify(ctx, ctx.Err(), step)
			}
			next, err := s.resume(ctx, method, events.lastID)
			if err != nil {
				return nil, err
			}
			if resumed != nil {
				_ = resumed.Close()
			} else {
				_ = first.Close()
			}
			resumed = next
			lastID, retry := events.lastID, events.retry
			events = newSSEReader(&limitedBody{r: next, max: s.p.opts.MaxMessageBytes}, s.p.opts.MaxMessageBytes)
			events.lastID, events.retry = lastID, retry
			continue
		}
		if err != nil {
			return nil, s.p.classify(ctx, err, step)
		}
		if (ev.event != "" && ev.event != "message") || strings.TrimSpace(ev.data) == "" {
			continue
		}
		result, found, err := s.p.matchAnswer([]byte(ev.data), id, step)
		if err != nil {
			return nil, err
		}
		if found {
			return result, nil
		}
	}
}

// resume GETs the endpoint with Last-Event-ID and returns the event stream's body.
func (s *streamableSession) resume(ctx context.Context, method, lastID string) (io.ReadCloser, error) {
	r := &request{method: http.MethodGet, url: s.endpoint, accept: contentTypeSSE,
		what: "the resumed event stream for " + method, session: s.sessionID, lastEventID: lastID}
	resp, final, err := s.p.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer drainAndClose(resp.Body)
		err := s.p.statusError(r, resp, final)
		if e, ok := err.(*Error); ok && e.Reason == ReasonHTTPError {
			e.Detail = fmt.Sprintf("the event stream for %s ended before the answer and resuming it failed: %s", method, e.Detail)
		}
		return nil, err
	}
	if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType != contentTypeSSE {
		drainAndClose(resp.Body)
		return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("resuming the event stream for %s: GET %s did not answer with an event stream", method, pathOf(final)), nil)
	}
	return resp.Body, nil
}

func (s *streamableSession) notify(ctx context.Context, method string) error {
	resp, _, err := s.post(ctx, method, notification(method))
	if err != nil {
		return err
	}
	drainAndClose(resp.Body)
	return nil
}

// close DELETEs the session the server gave, best effort: at most a second, within
// the handshake's deadline.
func (s *streamableSession) close(ctx context.Context) {
	if s.sessionID == "" || ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, _, err := s.p.do(ctx, &request{method: http.MethodDelete, url: s.endpoint, what: "the session close", session: s.sessionID})
	if err == nil {
		drainAndClose(resp.Body)
	}
}

// ---- header checks (RFC 9110 field names and values) ----

func validHeaderName(name string) bool {
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

func validHeaderValue(value string) bool {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func validSessionID(id string) bool {
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}
