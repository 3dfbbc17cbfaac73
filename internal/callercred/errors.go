package callercred

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// ErrPassThrough is an exchange whose answer would let the caller's token reach the
// remote: the subject token came back unchanged, or the new token keeps an audience
// of the caller's token (so the remote could replay it to the gateway). The MCP
// authorization spec forbids passing a caller's token through.
var ErrPassThrough = errors.New("the token endpoint answered with the caller's own token or its audience; passing a caller's token through is refused")

// ExchangeError is a failed exchange. Its text names the token endpoint's host and,
// when the endpoint answered an OAuth error, its code and description; never a token
// or a secret.
type ExchangeError struct {
	// Host is the token endpoint's host[:port].
	Host string
	// Code is the OAuth error code ("invalid_client", "invalid_grant", …), "" when the
	// endpoint did not answer one.
	Code string
	// Description is the endpoint's error_description, clipped, with any credential
	// the request carried blanked out.
	Description string
	// Status is the HTTP status, when the endpoint answered something other than an
	// OAuth error.
	Status int
	err    error
}

func (e *ExchangeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "token exchange at %s failed", e.Host)
	switch {
	case e.Code != "":
		b.WriteString(": " + e.Code)
		if e.Description != "" {
			b.WriteString(": " + e.Description)
		}
	case e.Status != 0:
		fmt.Fprintf(&b, ": HTTP status %d without an OAuth error", e.Status)
	}
	if e.err != nil {
		b.WriteString(": " + e.err.Error())
	}
	return b.String()
}

func (e *ExchangeError) Unwrap() error { return e.err }

const maxDescription = 200

var statusNotOK = regexp.MustCompile(`^http status not ok: (\d{3})`)

// exchangeError turns what zitadel's client returned into an ExchangeError. Only the
// OAuth error, a transport error (the URL and the network's words) or a status is
// kept: zitadel's other errors quote the answer's body, which can hold a token.
// secrets are the values the request carried, blanked out of the description should
// the endpoint echo one.
func exchangeError(host string, err error, secrets ...string) *ExchangeError {
	e := &ExchangeError{Host: host}
	var oauth *oidc.Error
	var status []string
	switch {
	case errors.As(err, &oauth):
		e.Code, e.Description = string(oauth.ErrorType), clipped(redact(oauth.Description, secrets))
	case isTransportError(err):
		e.err = err
	case errors.Is(err, httphelper.ErrResponseBodyTooLarge):
		e.err = httphelper.ErrResponseBodyTooLarge
	default:
		if status = statusNotOK.FindStringSubmatch(err.Error()); status != nil {
			_, _ = fmt.Sscan(status[1], &e.Status)
		} else {
			e.err = errors.New("the answer is not a token exchange response")
		}
	}
	return e
}

func redact(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// clipped keeps a description from a token endpoint or the operator short enough to
// quote in an error: one line of at most maxDescription bytes.
func clipped(s string) string { return clip.Line(s, maxDescription) }
