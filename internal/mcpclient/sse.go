package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	event, data, id string
}

// sseReader parses a text/event-stream; no line or event may exceed max bytes.
type sseReader struct {
	br  *bufio.Reader
	max int64
	// lastID and retry are the stream's last event ID and reconnection delay, as
	// the fields set them (whether or not their event had data).
	lastID string
	retry  time.Duration
}

func newSSEReader(r io.Reader, max int64) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 32<<10), max: max}
}

// readLine returns one line without its end of line (LF or CRLF). A line cut short
// by the end of the stream is io.ErrUnexpectedEOF.
func (s *sseReader) readLine() (string, error) {
	var line []byte
	for {
		chunk, err := s.br.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > s.max+16 {
			return "", errTooLarge
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		break
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return string(line), nil
}

// next returns the next event that has data. io.EOF: the stream ended cleanly between
// events; io.ErrUnexpectedEOF: it ended inside one.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data strings.Builder
	hasData, started := false, false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && started {
				err = io.ErrUnexpectedEOF
			}
			return sseEvent{}, err
		}
		if line == "" {
			if hasData {
				ev.data = data.String()
				return ev, nil
			}
			ev, started = sseEvent{}, false
			continue
		}
		started = true
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.event = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				ev.id, s.lastID = value, value
			}
		case "retry":
			if ms, err := strconv.ParseUint(value, 10, 32); err == nil {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
			if int64(data.Len()) > s.max {
				return sseEvent{}, errTooLarge
			}
		}
	}
}

// ---- the HTTP+SSE transport (protocol 2024-11-05) ----

type sseItem struct {
	ev  sseEvent
	err error
}

type sseSession struct {
	p         *prober
	streamURL *url.URL // where the stream answered (after redirects)
	endpoint  *url.URL // where messages are POSTed
	body      io.ReadCloser
	counted   *countingReader
	events    chan sseItem
	done      chan struct{}
}

// countingReader counts the bytes of the stream, for details.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		err = &readError{err: err, n: c.n}
	}
	return n, err
}

// openSSE GETs the stream and waits for its endpoint event.
func (p *prober) openSSE(ctx context.Context) (*sseSession, error) {
	r := &request{method: http.MethodGet, url: p.url, accept: contentTypeSSE, what: "the SSE stream"}
	resp, final, err := p.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer drainAndClose(resp.Body)
		return nil, p.statusError(r, resp, final)
	}
	if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType != contentTypeSSE {
		drainAndClose(resp.Body)
		what := "no Content-Type"
		if mediaType != "" {
			what = "Content-Type " + clipText(mediaType, 60)
		}
		return nil, p.fail(ReasonProtocolError, fmt.Sprintf("GET %s answered with %s, not an SSE stream (%s): is this an MCP SSE endpoint?",
			pathOf(final), what, contentTypeSSE), nil)
	}
	s := &sseSession{
		p:         p,
		streamURL: final,
		body:      resp.Body,
		counted:   &countingReader{r: resp.Body},
		events:    make(chan sseItem, 16),
		done:      make(chan struct{}),
	}
	go s.read()

	step := "the endpoint event of the SSE stream GET " + pathOf(final)
	for {
		ev, err := s.nextEvent(ctx, step)
		if err != nil {
			s.close(ctx)
			return nil, err
		}
		if ev.event != "endpoint" {
			continue
		}
		endpoint, err := final.Parse(strings.TrimSpace(ev.data))
		if err != nil {
			s.close(ctx)
			return nil, p.fail(ReasonProtocolError, "the endpoint event of the SSE stream holds no URL", err)
		}
		if originOf(endpoint) != originOf(final) {
			s.close(ctx)
			return nil, p.fail(ReasonProtocolError, fmt.Sprintf("the SSE stream named a message endpoint on another origin (%s, not %s); refused",
				originOf(endpoint), originOf(final)), nil)
		}
		s.endpoint = endpoint
		return s, nil
	}
}

// read feeds the events of the stream to s.events until it fails or s is closed.
func (s *sseSession) read() {
	defer close(s.events)
	events := newSSEReader(s.counted, s.p.opts.MaxMessageBytes)
	for {
		ev, err := events.next()
		select {
		case s.events <- sseItem{ev: ev, err: err}:
		case <-s.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// nextEvent waits for the next event of the stream; step names what was awaited.
func (s *sseSession) nextEvent(ctx context.Context, step string) (sseEvent, error) {
	select {
	case item, ok := <-s.events:
		if !ok || item.err == io.EOF {
			return sseEvent{}, s.p.fail(ReasonConnectionDropped, fmt.Sprintf("the SSE stream GET %s ended before %s", pathOf(s.streamURL), step), io.EOF)
		}
		if item.err == errTooLarge {
			return sseEvent{}, s.p.fail(ReasonResponseTooLarge, fmt.Sprintf("an event of the SSE stream GET %s is larger than %d bytes (MaxMessageBytes)",
				pathOf(s.streamURL), s.p.opts.MaxMessageBytes), errTooLarge)
		}
		if item.err != nil {
			return sseEvent{}, s.p.classify(ctx, item.err, step)
		}
		return item.ev, nil
	case <-ctx.Done():
		return sseEvent{}, s.p.classify(ctx, ctx.Err(), step)
	}
}

func (s *sseSession) post(ctx context.Context, what string, body []byte) error {
	r := &request{method: http.MethodPost, url: s.endpoint, body: body, accept: contentTypeJSON + ", " + contentTypeSSE, what: what}
	resp, final, err := s.p.do(ctx, r)
	if err != nil {
		return err
	}
	defer drainAndClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return s.p.statusError(r, resp, final)
	}
	return nil
}

func (s *sseSession) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, body := s.p.newRequest(method, params)
	if err := s.post(ctx, method, body); err != nil {
		return nil, err
	}
	step := "the answer to " + method + " on the SSE stream GET " + pathOf(s.streamURL)
	for {
		ev, err := s.nextEvent(ctx, step)
		if err != nil {
			return nil, err
		}
		if (ev.event != "" && ev.event != "message") || strings.TrimSpace(ev.data) == "" {
			continue
		}
		result, found, err := s.p.matchAnswer([]byte(ev.data), id, "an event of the SSE stream GET "+pathOf(s.streamURL))
		if err != nil {
			return nil, err
		}
		if found {
			return result, nil
		}
	}
}

func (s *sseSession) notify(ctx context.Context, method string) error {
	return s.post(ctx, method, notification(method))
}

// close ends the stream (the HTTP+SSE transport has no session DELETE).
func (s *sseSession) close(context.Context) {
	select {
	case <-s.done:
	default:
		close(s.done)
		_ = s.body.Close()
	}
}
