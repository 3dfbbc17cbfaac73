package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// fail builds an *Error, scrubbing every header value from the detail (a server may
// echo a token back in an error page or a JSON-RPC message).
func (p *prober) fail(reason, detail string, err error) *Error {
	return &Error{Reason: reason, Detail: p.redact(detail), Err: err, marker: HandshakeMarker}
}

func (p *prober) redact(s string) string { return p.redactor.Redact(s) }

// classify turns a transport failure during step (e.g. "the answer to initialize from
// POST /mcp") into an *Error. A timeout names the handshake's budget, as the deadline
// is the handshake's own or the caller's.
func (p *prober) classify(ctx context.Context, err error, step string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	f := describeFailure(ctx, err, step, p.url, p.opts.MaxMessageBytes)
	if f.reason == ReasonTimeout {
		f.detail += fmt.Sprintf(" (handshake timeout %s)", p.budget)
	}
	return p.fail(f.reason, f.detail, err)
}

// jsonErrorText shortens an encoding/json error.
func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	}
	return ClipText(err.Error(), 200)
}
