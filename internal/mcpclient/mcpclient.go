// Package mcpclient is the one MCP client of the project, over streamable HTTP or the
// older HTTP+SSE transport: one engine (Client and Session), one set of failure
// reasons and one set of limits, used two ways:
//
//   - Client and Session: the gateway's long-lived sessions, shared by concurrent
//     tools/call requests, whose failures say whether the server provably did not act
//     on the request (Error.NotProcessed), so a caller can retry without running a tool
//     twice.
//   - Probe: the operator's handshake (and `adapter probe`): one session of a Client
//     that connects, lists every tool and closes within one HandshakeTimeout, following
//     redirects only as its CheckRedirect allows.
//
// It speaks the few JSON-RPC messages itself over net/http instead of driving mcp-go's
// client: mcp-go's client reads answers without a size bound, follows no caller
// redirect policy and reports failures as wrapped strings, while every message here is
// bounded, every connection goes through the caller's dialer, header values never
// appear in an error, and every failure is an *Error with a precise Reason. Plain-HTTP
// exchanges run on the caller's goroutine over the package's own pool of kept-alive
// connections (Transport); https goes through net/http's Transport.
package mcpclient

import (
	"errors"
	"fmt"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// Transports, as the RemoteToolImport API and the adapter config name them.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// Limits: the defaults of zero option fields, the same for the probe and the gateway.
const (
	// DefaultTimeout bounds a whole Probe.
	DefaultTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds Client.Connect (the initialize handshake).
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMaxMessageBytes bounds every answer body and every event of a stream.
	DefaultMaxMessageBytes int64 = 4 << 20
	// DefaultMaxTools bounds the tools ListTools (and so a Probe) accepts over all
	// pages.
	DefaultMaxTools = 1000
	// DefaultMaxIdleConnsPerHost is the depth of a Client's keep-alive pool.
	DefaultMaxIdleConnsPerHost = 64
)

// Client identities sent in initialize.
const (
	ClientName           = "cantus-operator"
	ClientVersion        = "0.1.0"
	DefaultClientName    = "cantus-adapter"
	DefaultClientVersion = "0.1.0"
)

// transportOrDefault is the transport to use: t, or streamable HTTP when t is empty. An
// unknown one is an error that names both transports (and no more than 40 bytes of t,
// which may come from a tenant's spec).
func transportOrDefault(t string) (string, error) {
	switch t {
	case "":
		return TransportStreamableHTTP, nil
	case TransportStreamableHTTP, TransportSSE:
		return t, nil
	default:
		return "", fmt.Errorf("transport %q: use %q or %q", clip.Line(t, 40), TransportStreamableHTTP, TransportSSE)
	}
}

// HandshakeMarker begins the message of every Probe failure, so that a program reading
// a status message or an adapter's answer can tell a failed handshake by prefix. Failures of a Session carry no marker of their own: the
// gateway prefixes its call markers.
const HandshakeMarker = "mcp_handshake_failed: "

// Reasons of an Error: the client's failure codes. The operator maps them to the API's
// condition reasons in one place; the adapter only logs and branches on them.
const (
	ReasonTimeout           = "Timeout"
	ReasonConnectionRefused = "ConnectionRefused" // includes "no route" and any other dial failure
	ReasonDNSError          = "DNSError"
	ReasonTLSError          = "TLSError"
	ReasonUnauthorized      = "Unauthorized"      // HTTP 401 or 403
	ReasonHTTPError         = "HTTPError"         // any other non-2xx status
	ReasonProtocolError     = "ProtocolError"     // not JSON, not JSON-RPC, not MCP, wrong content type
	ReasonInitializeFailed  = "InitializeFailed"  // a JSON-RPC error answer to initialize
	ReasonToolsListFailed   = "ToolsListFailed"   // a JSON-RPC error answer to tools/list, or a looping cursor
	ReasonResponseTooLarge  = "ResponseTooLarge"  // a body over MaxMessageBytes, or more than MaxTools tools
	ReasonRedirectRefused   = "RedirectRefused"   // CheckRedirect said no (or a non-http(s) target)
	ReasonConnectionDropped = "ConnectionDropped" // EOF or reset before the answer was complete
	ReasonSessionLost       = "SessionLost"       // the server does not know the session (any more)
	ReasonInvalidConfig     = "InvalidConfig"     // the options themselves are unusable
)

// Reasons lists every Reason an Error may carry, so that the operator can hold its
// mapping to the API's condition reasons complete.
var Reasons = []string{
	ReasonTimeout, ReasonConnectionRefused, ReasonDNSError, ReasonTLSError, ReasonUnauthorized,
	ReasonHTTPError, ReasonProtocolError, ReasonInitializeFailed, ReasonToolsListFailed,
	ReasonResponseTooLarge, ReasonRedirectRefused, ReasonConnectionDropped, ReasonSessionLost,
	ReasonInvalidConfig, ReasonContentListFailed,
}

// Error is a failed handshake or a request that got no JSON-RPC answer. Detail is
// short, names the step and never holds a header value.
type Error struct {
	Reason string
	Detail string
	// NotProcessed is true when the server provably did not act on the request: it
	// never left this process (no connection could be made), or the server refused it
	// before processing (unknown session, credentials refused, a draining cantus
	// adapter). Retrying such a request cannot run a tool twice.
	NotProcessed bool
	// SessionLost is true when the session cannot be used again: connect anew.
	SessionLost bool
	Err         error
	// marker begins the message (HandshakeMarker for Probe failures).
	marker string
}

func (e *Error) Error() string { return e.marker + e.Detail }

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of an *Error in err's chain, "" if there is none.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
