package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// Protocol 2026-07-28 has no initialize and no session: every request carries the
// protocol version, the client's identity and its capabilities in its own _meta, and
// mirrors its method (and the name it acts on) in headers (SEP-2575, SEP-2243). A
// server that serves it says so in server/discover. The Client speaks it through a
// Session made by Modern, which connects nothing: its requests are independent POSTs.

// Eras: the protocol revisions a remote is spoken to in. EraLegacy is the newest one
// with the initialize handshake (ProtocolVersion); EraModern the stateless one.
const (
	EraLegacy = "2025-11-25"
	EraModern = "2026-07-28"
)

// Eras lists the eras this client speaks, newest first. The slice is the caller's own.
func Eras() []string { return []string{EraModern, EraLegacy} }

// IsModern reports whether a protocol version is of the stateless era (2026-07-28 or
// a newer date).
func IsModern(version string) bool { return mcp.IsModernProtocol(version) }

// RequestMeta is what a request of protocol 2026-07-28 says of its client in _meta
// besides the client's name (ClientOptions.ClientName and ClientVersion).
type RequestMeta struct {
	// ProtocolVersion is sent in _meta and in MCP-Protocol-Version; EraModern when
	// empty.
	ProtocolVersion string
	// ClientCapabilities is the capabilities object (JSON); empty: those of
	// ClientOptions.Capabilities.
	ClientCapabilities json.RawMessage
	// LogLevel, when set, asks for log messages at or above it for this request.
	LogLevel string
	// ParamHeaders are not _meta but the Mcp-Param-* headers of a tools/call, which
	// mirror the arguments a tool's inputSchema marks x-mcp-header (SEP-2243):
	// mcp.GenerateParamHeaders makes them.
	ParamHeaders map[string]string
}

// Modern returns a session of protocol 2026-07-28 on c: nothing is connected, every
// request is stateless. meta is the _meta of its requests (a call may replace it,
// CallOptions.Meta). Over the sse transport, which the era does not have, the
// requests fail as the server answers them.
func (c *Client) Modern(meta RequestMeta) *Session {
	if meta.ProtocolVersion == "" {
		meta.ProtocolVersion = EraModern
	}
	if len(meta.ClientCapabilities) == 0 {
		meta.ClientCapabilities, _ = json.Marshal(InitializeParams("", "", c.opts.Capabilities...)["capabilities"])
	}
	s := &Session{c: c, endpoint: c.url, pending: map[int64]chan answer{}, progress: map[string]func(Message){},
		lost: make(chan struct{}), modern: &meta}
	if c.opts.HandshakeTimeout > 0 {
		// A probe's budget bounds its stateless session as it bounds a connected one.
		s.deadline = time.Now().Add(c.opts.HandshakeTimeout)
	}
	s.protocol.Store(&meta.ProtocolVersion)
	return s
}

// Modern reports whether s speaks protocol 2026-07-28.
func (s *Session) Modern() bool { return s.modern != nil }

// modernRequest is what the transport sends besides the body of a 2026-07-28 request.
type modernRequest struct {
	protocol string
	name     string // Mcp-Name, encoded; "" for a method that names nothing
	params   map[string]string
}

// modernRequest adds the _meta of protocol 2026-07-28 to params (keeping whatever
// _meta they hold: a progress token, the trace context) and returns what the headers
// need. meta, when set, replaces the session's.
func (s *Session) modernRequest(method string, params any, meta *RequestMeta) (*modernRequest, any, error) {
	if meta == nil {
		meta = s.modern
	}
	protocol := meta.ProtocolVersion
	if protocol == "" {
		protocol = s.modern.ProtocolVersion
	}
	caps := meta.ClientCapabilities
	if len(caps) == 0 {
		caps = s.modern.ClientCapabilities
	}
	members := map[string]json.RawMessage{}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, nil, err
		}
		if string(raw) != "null" {
			if err := json.Unmarshal(raw, &members); err != nil {
				return nil, nil, fmt.Errorf("the params of %s are not a JSON object: %w", method, err)
			}
		}
	}
	metaMembers := map[string]json.RawMessage{}
	if old := members["_meta"]; len(old) > 0 {
		if err := json.Unmarshal(old, &metaMembers); err != nil {
			return nil, nil, fmt.Errorf("the _meta of %s is not a JSON object: %w", method, err)
		}
	}
	info, _ := json.Marshal(map[string]string{"name": s.c.opts.ClientName, "version": s.c.opts.ClientVersion})
	version, _ := json.Marshal(protocol)
	metaMembers[mcp.MetaKeyProtocolVersion] = version
	metaMembers[mcp.MetaKeyClientInfo] = info
	metaMembers[mcp.MetaKeyClientCapabilities] = caps
	if meta.LogLevel != "" {
		level, _ := json.Marshal(meta.LogLevel)
		metaMembers[mcp.MetaKeyLogLevel] = level
	}
	encoded, err := json.Marshal(metaMembers)
	if err != nil {
		return nil, nil, err
	}
	members["_meta"] = encoded
	out := &modernRequest{protocol: protocol, params: meta.ParamHeaders}
	if name, ok := nameOf(method, members); ok {
		out.name, _ = mcp.EncodeHeaderValue(name)
	}
	return out, members, nil
}

// nameOf is what Mcp-Name mirrors: params.name of tools/call and prompts/get,
// params.uri of resources/read, params.taskId of the Tasks extension's methods.
func nameOf(method string, members map[string]json.RawMessage) (string, bool) {
	key := ""
	switch mcp.MCPMethod(method) {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		key = "name"
	case mcp.MethodResourcesRead:
		key = "uri"
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel:
		key = "taskId"
	default:
		return "", false
	}
	var name string
	if json.Unmarshal(members[key], &name) != nil {
		return "", false
	}
	return name, true
}

// sentModern says whether req was sent in protocol 2026-07-28.
func sentModern(req *http.Request) bool {
	return req != nil && IsModern(req.Header.Get(HeaderProtocolVersion))
}

// Discovery is what a server said of itself in server/discover.
type Discovery struct {
	// SupportedVersions are the revisions it serves, newest first.
	SupportedVersions []string
	Name, Version     string // from the result's _meta serverInfo, when it sent it
	Instructions      string
	// Capabilities are named as ServerInfo's are.
	Capabilities []string
	Extensions   []string
}

// Serves reports whether the server serves version.
func (d *Discovery) Serves(version string) bool { return slices.Contains(d.SupportedVersions, version) }

// Discover asks the server what it serves (server/discover, protocol 2026-07-28).
// A server of an older era answers it with an error (an *RPCError or an *Error).
func (s *Session) Discover(ctx context.Context) (*Discovery, error) {
	if s.modern == nil {
		return nil, &Error{Reason: ReasonInvalidConfig, Detail: "server/discover is a request of protocol " + EraModern, NotProcessed: true}
	}
	raw, err := s.request(ctx, string(mcp.MethodServerDiscover), nil, nil)
	if err != nil {
		return nil, err
	}
	var res struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.SupportedVersions) == 0 {
		detail := "the answer to server/discover names no supportedVersions"
		if err != nil {
			detail = "the answer to server/discover is not a DiscoverResult: " + jsonErrorText(err)
		}
		return nil, s.c.fail(ReasonProtocolError, detail, err)
	}
	d := &Discovery{Instructions: res.Instructions, Capabilities: capabilityNames(res.Capabilities),
		Extensions: extensionNames(res.Capabilities["extensions"])}
	for _, v := range res.SupportedVersions {
		d.SupportedVersions = append(d.SupportedVersions, clip.Line(v, 40))
	}
	var info struct{ Name, Version string }
	if json.Unmarshal(res.Meta[mcp.MetaKeyServerInfo], &info) == nil {
		d.Name, d.Version = info.Name, info.Version
	}
	s.info = ServerInfo{Name: d.Name, Version: d.Version, Instructions: d.Instructions, Capabilities: d.Capabilities, Extensions: d.Extensions}
	s.server = d.Name + " " + d.Version
	return d, nil
}
