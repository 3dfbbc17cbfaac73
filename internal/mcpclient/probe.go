package mcpclient

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// Options configures one Probe.
type Options struct {
	// URL is the endpoint, e.g. http://host:port/mcp (streamable HTTP) or
	// http://host:port/sse (SSE). Only http and https; no credentials in it.
	URL string
	// Transport is TransportStreamableHTTP (default) or TransportSSE.
	Transport string
	// Headers are sent on every request to the URL's host. Their values may be
	// secrets: they never appear in errors, and they are not sent to another host
	// after a redirect, nor over plain http after a redirect from https.
	Headers map[string]string
	// CABundle (PEM), when set, is the only set of CAs TLS trusts.
	CABundle []byte
	// Timeout bounds the whole handshake: connecting, initialize, every tools/list
	// page and closing the session. Default DefaultTimeout.
	Timeout time.Duration
	// MaxMessageBytes bounds every response body (and every event of an SSE
	// stream). Default DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxTools bounds the number of tools over all pages. Default DefaultMaxTools.
	MaxTools int
	// MaxContentItems bounds the prompts, the resources and the resource templates,
	// each over all pages. Default DefaultMaxContentItems.
	MaxContentItems int
	// Dial, when set, replaces net.Dialer.DialContext for every connection, including
	// those made after a redirect (the operator passes a dialer that connects only to
	// the addresses its allowlist checked). TLS runs on top of the returned conn, with
	// the URL's host as the server name.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CheckRedirect is called for every redirect target before it is followed; an
	// error refuses the redirect (Reason RedirectRefused) and the target gets no
	// request. Unset, every http(s) redirect is followed (ClientOptions.CheckRedirect
	// says how).
	CheckRedirect func(target *url.URL) error
	// Capabilities are the client capabilities declared in initialize (none by
	// default). A probe calls no tool, so it is never asked what they offer; but some
	// servers list a tool only to clients able to answer what it asks
	// (server-everything's elicitation and sampling tools).
	Capabilities []string
}

// Result is what a successful handshake learnt.
type Result struct {
	ServerName      string `json:"serverName"`
	ServerVersion   string `json:"serverVersion"`
	ProtocolVersion string `json:"protocolVersion"`
	Instructions    string `json:"instructions,omitempty"`
	// Capabilities are the sorted names of the capabilities the server announced:
	// "tools", "logging", "prompts", "resources", "completions", …; and
	// definition.CapabilityResourcesSubscribe ("resources.subscribe") when it offers resource
	// subscriptions.
	Capabilities []string `json:"capabilities"`
	// Extensions are the sorted names of the extensions the server announced.
	Extensions []string `json:"extensions,omitempty"`
	// ModernExtensions are those it announced in server/discover, when it serves
	// protocol 2026-07-28 (the Tasks extension is one of that era).
	ModernExtensions []string `json:"modernExtensions,omitempty"`
	// Tools are the tools of every page, in the server's order. A server that does
	// not announce the tools capability is not asked (and has none).
	Tools []Tool `json:"tools"`
	// Content is what the server serves besides tools, listed when it announced the
	// capability (prompts, resources).
	Content Content `json:"content"`
	// Eras are the protocol eras the server serves (EraModern, EraLegacy), newest
	// first. Everything above is what it serves in EraLegacy when it serves that era,
	// else in EraModern.
	Eras []string `json:"eras,omitempty"`
	// ModernTools are the tools it lists to a client of protocol 2026-07-28, when it
	// serves that era (it may list more there than in EraLegacy: tools that ask for
	// input with input-required results).
	ModernTools []Tool `json:"modernTools,omitempty"`
	// ModernContent is the content it lists to a client of protocol 2026-07-28, when
	// it serves that era (prompts that ask for input exist only there).
	ModernContent *Content `json:"modernContent,omitempty"`
	// RequiredCapabilities maps the tools (of either era) the server lists only to
	// clients declaring some of Options.Capabilities to the capabilities they need:
	// the one whose declaration alone lists the tool, or all of them when none does.
	RequiredCapabilities map[string][]string `json:"requiredCapabilities,omitempty"`
}

// Serves reports whether the server serves era.
func (r *Result) Serves(era string) bool { return slices.Contains(r.Eras, era) }

// Probe runs the operator's handshake on one Client and Session: New, Connect
// (initialize, notifications/initialized; over SSE the stream first), ListTools
// through every page when the server announced tools, and Close (a DELETE of the
// session the server gave). All of it happens within opts.Timeout (and ctx). The error
// is always an *Error whose message begins with HandshakeMarker.
func Probe(ctx context.Context, opts Options) (*Result, error) {
	c, err := New(opts.clientOptions(handshakeBudget(ctx, opts.Timeout)))
	if err != nil {
		return nil, handshakeFailure(err)
	}
	defer c.CloseIdleConnections()
	modern, err := probeModern(ctx, c, opts)
	if err != nil {
		return nil, handshakeFailure(err)
	}
	s, err := c.Connect(ctx)
	if err != nil {
		if modern == nil {
			return nil, handshakeFailure(err)
		}
		// A server of protocol 2026-07-28 only: what it serves is what it listed there.
		return modern, nil
	}
	defer s.Close()
	res, err := probeSession(ctx, s, opts)
	if err != nil {
		return nil, handshakeFailure(err)
	}
	if res.RequiredCapabilities, err = toolNeeds(ctx, res.Tools, opts.Capabilities, legacyLister(c, opts.MaxTools)); err != nil {
		return nil, handshakeFailure(err)
	}
	res.Eras = []string{EraLegacy}
	if modern != nil {
		res.Eras, res.ModernTools, res.ModernExtensions = Eras(), modern.ModernTools, modern.ModernExtensions
		res.ModernContent = &modern.Content
		res.RequiredCapabilities = mergeNeeds(res.RequiredCapabilities, modern.RequiredCapabilities)
	}
	return res, nil
}

// probeSession lists what the server serves on s.
func probeSession(ctx context.Context, s *Session, opts Options) (*Result, error) {
	info := s.ServerInfo()
	res := &Result{
		ServerName:      info.Name,
		ServerVersion:   info.Version,
		ProtocolVersion: s.ProtocolVersion(),
		Instructions:    info.Instructions,
		Capabilities:    info.Capabilities,
		Extensions:      info.Extensions,
		Tools:           []Tool{},
	}
	if slices.Contains(info.Capabilities, "tools") {
		var err error
		if res.Tools, err = s.ListTools(ctx, opts.MaxTools); err != nil {
			return nil, err
		}
	}
	res.Content = listContent(ctx, s, info, opts.MaxContentItems)
	return res, nil
}

// probeModern asks the server whether it serves protocol 2026-07-28 (server/discover)
// and, when it does, what it lists there; nil when it does not, or fails to (the
// handshake then goes on in EraLegacy, as for every server before that era). A
// failure that initialize would meet as well (no connection, TLS, a refused redirect
// or credentials) ends the handshake here. server/discover gets at most a third of
// the handshake's budget, so that a server that never answers it leaves time for
// initialize.
func probeModern(ctx context.Context, c *Client, opts Options) (*Result, error) {
	if c.opts.Transport != TransportStreamableHTTP {
		return nil, nil
	}
	s := c.Modern(RequestMeta{})
	discoverCtx, cancel := context.WithTimeout(ctx, max(c.opts.HandshakeTimeout/3, time.Millisecond))
	d, err := s.Discover(discoverCtx)
	cancel()
	if conclusive(err) {
		return nil, err
	}
	if err != nil || !d.Serves(EraModern) {
		return nil, nil
	}
	res, err := probeSession(ctx, s, opts)
	if err != nil {
		return nil, nil
	}
	if res.RequiredCapabilities, err = toolNeeds(ctx, res.Tools, opts.Capabilities, modernLister(c, opts.MaxTools)); err != nil {
		return nil, nil
	}
	res.ProtocolVersion, res.Eras, res.ModernTools, res.ModernExtensions = EraModern, []string{EraModern}, res.Tools, res.Extensions
	return res, nil
}

// conclusive is true for a failure of server/discover that says nothing of the era:
// initialize would fail the same way.
func conclusive(err error) bool {
	switch ReasonOf(err) {
	case ReasonConnectionRefused, ReasonDNSError, ReasonTLSError, ReasonRedirectRefused, ReasonUnauthorized:
		return true
	}
	return false
}

// handshakeBudget is what the handshake has: timeout (DefaultTimeout when unset), or
// less when ctx ends first.
func handshakeBudget(ctx context.Context, timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < timeout {
		return max(time.Until(deadline).Round(time.Millisecond), time.Millisecond)
	}
	return timeout
}

// clientOptions are the options of the one-session client of a Probe with budget.
func (o Options) clientOptions(budget time.Duration) ClientOptions {
	checkRedirect := o.CheckRedirect
	if checkRedirect == nil {
		checkRedirect = func(*url.URL) error { return nil }
	}
	return ClientOptions{
		URL:              o.URL,
		Transport:        o.Transport,
		Headers:          o.Headers,
		CABundle:         o.CABundle,
		HandshakeTimeout: budget,
		Dial:             o.Dial,
		CheckRedirect:    checkRedirect,
		MaxMessageBytes:  o.MaxMessageBytes,
		// One session, closed at the end of the Probe.
		MaxIdleConnsPerHost: 2,
		ClientName:          ClientName,
		ClientVersion:       ClientVersion,
		Capabilities:        o.Capabilities,
	}
}

// RelayableCapabilities are the client capabilities of the requests a gateway can
// relay from a remote to its callers.
func RelayableCapabilities() []string { return []string{"elicitation", "roots", "sampling"} }

// handshakeFailure marks err, an *Error of the Client or Session, as a failed
// handshake.
func handshakeFailure(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Reason: ReasonProtocolError, Detail: clip.Line(err.Error(), 200), Err: err}
	}
	out := *e
	out.marker = HandshakeMarker
	return &out
}
