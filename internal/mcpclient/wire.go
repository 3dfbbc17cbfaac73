package mcpclient

import (
	"errors"
	"time"
)

// ProtocolVersion is the MCP revision the client asks for in initialize: the newest
// one that still has the initialize handshake.
const ProtocolVersion = "2025-11-25"

// SupportedProtocolVersions returns the revisions accepted in an initialize answer,
// newest first. The slice is the caller's own.
func SupportedProtocolVersions() []string {
	return []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
}

// Header names of the streamable HTTP transport.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderLastEventID     = "Last-Event-ID"
	// HeaderMethod and HeaderName mirror a 2026-07-28 request's method and the name
	// (or URI) it acts on (SEP-2243), so that proxies can route without the body.
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// Media types of MCP messages.
const (
	ContentTypeJSON = "application/json"
	ContentTypeSSE  = "text/event-stream"
	// AcceptAnswer is the Accept header of a POST: an answer may come either way.
	AcceptAnswer = ContentTypeJSON + ", " + ContentTypeSSE
)

// MaxRedirects bounds the redirects followed for one request.
const MaxRedirects = 5

// Resumption of an answer's event stream (SEP-1699, 2025-11-25).
const (
	// MaxResumes bounds how often one answer's event stream is resumed.
	MaxResumes = 3
	// MaxRetryWait caps the reconnection delay a server may ask for.
	MaxRetryWait = 5 * time.Second
)

// ErrTooLarge is the failure of a read over its size limit (a body, an event, or a
// line of an event stream).
var ErrTooLarge = errors.New("message over the size limit")
