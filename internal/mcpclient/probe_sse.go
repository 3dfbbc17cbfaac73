package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ---- the HTTP+SSE transport (protocol 2024-11-05) ----

type sseItem struct {
	ev  Event
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
	r := &request{method: http.MethodGet, url: p.url, accept: ContentTypeSSE, what: "the SSE stream"}
	resp, final, err := p.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer DrainAndClose(resp.Body)
		return nil, p.statusError(r, resp, final)
	}
	if mediaType := MediaType(resp); mediaType != ContentTypeSSE {
		DrainAndClose(resp.Body)
		what := "no Content-Type"
		if mediaType != "" {
			what = "Content-Type " + ClipText(mediaType, 60)
		}
		return nil, p.fail(ReasonProtocolError, fmt.Sprintf("GET %s answered with %s, not an SSE stream (%s): is this an MCP SSE endpoint?",
			Path(final), what, ContentTypeSSE), nil)
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

	step := "the endpoint event of the SSE stream GET " + Path(final)
	for {
		ev, err := s.nextEvent(ctx, step)
		if err != nil {
			s.close(ctx)
			return nil, err
		}
		if ev.Type != "endpoint" {
			continue
		}
		endpoint, err := final.Parse(strings.TrimSpace(ev.Data))
		if err != nil {
			s.close(ctx)
			return nil, p.fail(ReasonProtocolError, "the endpoint event of the SSE stream holds no URL", err)
		}
		if Origin(endpoint) != Origin(final) {
			s.close(ctx)
			return nil, p.fail(ReasonProtocolError, fmt.Sprintf("the SSE stream named a message endpoint on another origin (%s, not %s); refused",
				Origin(endpoint), Origin(final)), nil)
		}
		s.endpoint = endpoint
		return s, nil
	}
}

// read feeds the events of the stream to s.events until it fails or s is closed.
func (s *sseSession) read() {
	defer close(s.events)
	events := NewEventReader(s.counted, s.p.opts.MaxMessageBytes)
	for {
		ev, err := events.Next()
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
func (s *sseSession) nextEvent(ctx context.Context, step string) (Event, error) {
	select {
	case item, ok := <-s.events:
		if !ok || errors.Is(item.err, io.EOF) {
			return Event{}, s.p.fail(ReasonConnectionDropped, fmt.Sprintf("the SSE stream GET %s ended before %s", Path(s.streamURL), step), io.EOF)
		}
		if errors.Is(item.err, ErrTooLarge) {
			return Event{}, s.p.fail(ReasonResponseTooLarge, fmt.Sprintf("an event of the SSE stream GET %s is larger than %d bytes (MaxMessageBytes)",
				Path(s.streamURL), s.p.opts.MaxMessageBytes), ErrTooLarge)
		}
		if item.err != nil {
			return Event{}, s.p.classify(ctx, item.err, step)
		}
		return item.ev, nil
	case <-ctx.Done():
		return Event{}, s.p.classify(ctx, ctx.Err(), step)
	}
}

func (s *sseSession) post(ctx context.Context, what string, body []byte) error {
	r := &request{method: http.MethodPost, url: s.endpoint, body: body, accept: AcceptAnswer, what: what}
	resp, final, err := s.p.do(ctx, r)
	if err != nil {
		return err
	}
	defer DrainAndClose(resp.Body)
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
	step := "the answer to " + method + " on the SSE stream GET " + Path(s.streamURL)
	for {
		ev, err := s.nextEvent(ctx, step)
		if err != nil {
			return nil, err
		}
		if !ev.IsMessage() {
			continue
		}
		result, found, err := s.p.matchAnswer([]byte(ev.Data), id, "an event of the SSE stream GET "+Path(s.streamURL))
		if err != nil {
			return nil, err
		}
		if found {
			return result, nil
		}
	}
}

func (s *sseSession) notify(ctx context.Context, method string) error {
	return s.post(ctx, method, Notification(method))
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
