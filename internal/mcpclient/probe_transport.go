package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

func newProber(opts Options) (*prober, error) {
	p := &prober{opts: opts, redactor: NewRedactor(opts.Headers)}
	p.url = &url.URL{Scheme: "http", Host: "invalid"} // for details of config errors
	o := &p.opts
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxTools <= 0 {
		o.MaxTools = DefaultMaxTools
	}
	var err error
	if o.Transport, err = transportOrDefault(o.Transport); err != nil {
		return nil, p.fail(ReasonInvalidConfig, err.Error(), nil)
	}
	u, err := ParseEndpoint(o.URL)
	if err != nil {
		return nil, p.fail(ReasonInvalidConfig, err.Error(), nil)
	}
	p.url = u
	if err := CheckHeaders(o.Headers); err != nil {
		return nil, p.fail(ReasonInvalidConfig, err.Error(), nil)
	}
	// No proxy from the environment (NewTransport): a proxy would connect to
	// addresses the caller's dialer never checked.
	p.transport, err = NewTransport(TransportConfig{CABundle: o.CABundle, Dial: o.Dial, IdleConnTimeout: o.Timeout})
	if err != nil {
		return nil, p.fail(ReasonTLSError, err.Error(), nil)
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
func (r *request) op() string { return r.method + " " + Path(r.url) }

// trusted reports whether the headers (which may be secrets) may go to target: the
// configured host, and no downgrade from https to http.
func (p *prober) trusted(target *url.URL) bool {
	if !strings.EqualFold(target.Hostname(), p.url.Hostname()) {
		return false
	}
	return p.url.Scheme != "https" || target.Scheme != "http"
}

// do sends r, following up to MaxRedirects redirects itself: each target is checked
// with CheckRedirect before any connection to it, and the method and body are kept
// (307/308 semantics, also for 301/302; a 303 is refused since MCP needs a POST). It
// returns the response and the URL that answered. Errors are *Error.
func (p *prober) do(ctx context.Context, r *request) (*http.Response, *url.URL, error) {
	u := r.url
	for hop := 0; ; hop++ {
		// The configured headers and the session go only where they are trusted.
		var headers map[string]string
		h := Headers{Accept: r.accept, ProtocolVersion: p.negotiatedVersion(), LastEventID: r.lastEventID,
			UserAgent: ClientName + "/" + ClientVersion}
		if p.trusted(u) {
			headers, h.SessionID = p.opts.Headers, r.session
		}
		req, err := NewRequest(ctx, r.method, u, r.body, headers, h)
		if err != nil {
			return nil, u, p.fail(ReasonInvalidConfig, fmt.Sprintf("cannot build the request %s: %v", r.op(), err), err)
		}

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
		DrainAndClose(resp.Body)
		from := r.method + " " + Path(u)
		if loc == "" {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s without a Location", status, from), nil)
		}
		next, err := u.Parse(loc)
		if err != nil {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s with a Location that does not parse", status, from), err)
		}
		next.Fragment, next.RawFragment = "", ""
		target := Origin(next) + Path(next)
		if next.Scheme != "http" && next.Scheme != "https" {
			return nil, u, p.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to a %s: URL refused: only http and https", from, ClipText(next.Scheme, 20)), nil)
		}
		if next.User != nil {
			return nil, u, p.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to a URL with credentials refused", from), nil)
		}
		if resp.StatusCode == http.StatusSeeOther && r.method != http.MethodGet {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("HTTP %s from %s to %s: a 303 turns the %s into a GET, which MCP cannot use", status, from, target, r.method), nil)
		}
		if hop >= MaxRedirects {
			return nil, u, p.fail(ReasonHTTPError, fmt.Sprintf("more than %d redirects, the last from %s to %s", MaxRedirects, from, target), nil)
		}
		if p.opts.CheckRedirect != nil {
			if err := p.opts.CheckRedirect(next); err != nil {
				return nil, u, p.fail(ReasonRedirectRefused, fmt.Sprintf("redirect from %s to %s refused: %v", from, target, err), err)
			}
		}
		u = next
	}
}

// statusError describes a non-2xx answer; a JSON-RPC error in its body (other than
// for 401/403) becomes an *rpcAnswerError so that initialize and tools/list failures
// keep their reasons.
func (p *prober) statusError(r *request, resp *http.Response, endpoint *url.URL) error {
	snippet, rpcErr := p.errorBody(resp)
	status := "HTTP " + resp.Status
	from := r.method + " " + Path(endpoint)
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
func (p *prober) errorBody(resp *http.Response) (string, *ErrorObject) {
	data := ReadErrorBody(resp.Body)
	mediaType := MediaType(resp)
	if mediaType == ContentTypeJSON {
		var m Message
		if json.Unmarshal(data, &m) == nil && m.Error != nil {
			return "", m.Error
		}
	}
	if mediaType == "text/plain" || mediaType == ContentTypeJSON {
		return ClipText(string(bytes.ToValidUTF8(data, nil)), 120), nil
	}
	return "", nil
}

// limitedBody reads at most Max bytes of a body, counting them; reading more fails
// with ErrTooLarge, and every failure is a *readError holding the count.
type limitedBody struct{ LimitedReader }

func newLimitedBody(r io.Reader, limit int64) *limitedBody {
	return &limitedBody{LimitedReader{R: r, Max: limit}}
}

func (l *limitedBody) Read(b []byte) (int, error) {
	n, err := l.LimitedReader.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &readError{err: err, n: l.N}
	}
	return n, err
}

// ---- JSON-RPC ----

func (p *prober) newRequest(method string, params any) (int64, []byte) {
	id := p.nextID.Add(1)
	data, _ := EncodeRequest(id, method, params)
	return id, data
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
	msgs, err := ParseMessages(data)
	if err != nil {
		what := "a JSON-RPC 2.0 message"
		if data[0] == '[' {
			what = "JSON-RPC 2.0"
		}
		return nil, false, p.fail(ReasonProtocolError, fmt.Sprintf("%s is not %s: %s", step, what, jsonErrorText(err)), err)
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
	r := &request{method: http.MethodPost, url: s.endpoint, body: body, accept: AcceptAnswer,
		what: what, session: s.sessionID}
	resp, final, err := s.p.do(ctx, r)
	if err != nil {
		return nil, r, err
	}
	// Later requests go straight to where the redirects led.
	s.endpoint = final
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer DrainAndClose(resp.Body)
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
		if sid := resp.Header.Get(HeaderSessionID); sid != "" {
			if !ValidSessionID(sid) {
				return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("the %s header of the answer to initialize holds characters other than visible ASCII", HeaderSessionID), nil)
			}
			s.sessionID = sid
		}
	}
	step := "the answer to " + method + " from " + r.method + " " + Path(s.endpoint)
	body2 := newLimitedBody(resp.Body, s.p.opts.MaxMessageBytes)
	switch mediaType := MediaType(resp); mediaType {
	case ContentTypeJSON:
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
	case ContentTypeSSE:
		return s.readStream(ctx, resp.Body, body2, id, method, step)
	case "":
		return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("%s (HTTP %s) has no Content-Type: want %s or %s", step, resp.Status, ContentTypeJSON, ContentTypeSSE), nil)
	default:
		return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("%s has Content-Type %s, not %s or %s: is this an MCP endpoint?",
			step, ClipText(mediaType, 60), ContentTypeJSON, ContentTypeSSE), nil)
	}
}

// readStream reads the answer to request id from an event stream. A stream that ends
// cleanly before the answer, after an event with an id, is resumed as the 2025-11-25
// transport describes (SEP-1699): after the server's retry delay, GET the endpoint
// with Last-Event-ID and read on there (AnswerStream).
func (s *streamableSession) readStream(ctx context.Context, first io.ReadCloser, body io.Reader, id int64, method, step string) (json.RawMessage, error) {
	limit := s.p.opts.MaxMessageBytes
	events := NewAnswerStream(body, limit, func(ctx context.Context, lastID string) (io.ReadCloser, error) {
		next, err := s.resume(ctx, method, lastID)
		if err != nil {
			return nil, err
		}
		if first != nil {
			_ = first.Close()
			first = nil
		}
		return struct {
			io.Reader
			io.Closer
		}{newLimitedBody(next, limit), next}, nil
	})
	defer events.Close()
	for {
		ev, err := events.Next(ctx)
		if errors.Is(err, io.EOF) {
			detail := fmt.Sprintf("the event stream of POST %s ended without the answer to %s", Path(s.endpoint), method)
			if events.Resumes() > 0 {
				detail += fmt.Sprintf(" (resumed %d times)", events.Resumes())
			}
			return nil, s.p.fail(ReasonConnectionDropped, detail, err)
		}
		if err != nil {
			// Failures to resume are *Error already, which classify keeps.
			return nil, s.p.classify(ctx, err, step)
		}
		if !ev.IsMessage() {
			continue
		}
		result, found, err := s.p.matchAnswer([]byte(ev.Data), id, step)
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
	r := &request{method: http.MethodGet, url: s.endpoint, accept: ContentTypeSSE,
		what: "the resumed event stream for " + method, session: s.sessionID, lastEventID: lastID}
	resp, final, err := s.p.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer DrainAndClose(resp.Body)
		err := s.p.statusError(r, resp, final)
		var e *Error
		if errors.As(err, &e) && e.Reason == ReasonHTTPError {
			e.Detail = fmt.Sprintf("the event stream for %s ended before the answer and resuming it failed: %s", method, e.Detail)
		}
		return nil, err
	}
	if MediaType(resp) != ContentTypeSSE {
		DrainAndClose(resp.Body)
		return nil, s.p.fail(ReasonProtocolError, fmt.Sprintf("resuming the event stream for %s: GET %s did not answer with an event stream", method, Path(final)), nil)
	}
	return resp.Body, nil
}

func (s *streamableSession) notify(ctx context.Context, method string) error {
	resp, _, err := s.post(ctx, method, Notification(method))
	if err != nil {
		return err
	}
	DrainAndClose(resp.Body)
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
		DrainAndClose(resp.Body)
	}
}
