// Package adapterconfig is the contract between the operator and the adapter: the
// rendered Config, its vocabulary (transports, paths, file names) and the checks that
// say whether an adapter would serve it. The operator renders and validates configs
// with it without linking the MCP server (package adapter), which reads and serves them.
package adapterconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Transport names, as in the SkillServer API.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// Paths the adapter serves besides the MCP endpoint.
const (
	PathMCP     = "/mcp"
	PathSSE     = "/sse"
	PathMessage = "/message"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
)

// ConfigFileName is the key of the rendered config in its ConfigMap and the file name
// at the mount path.
const ConfigFileName = "adapter.json"

// Config is everything one adapter serves. The controller renders it from a SkillServer;
// the adapter reads it from a file. It never holds secret values, only file paths.
type Config struct {
	Server    ServerInfo `json:"server"`
	Transport string     `json:"transport"`
	Port      int32      `json:"port"`
	Stateless bool       `json:"stateless"`
	// BearerTokenFile, when set, is a file holding the token clients must present.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	Tools           []Tool `json:"tools"`
	// Memory, when set, adds the guarded memory tool.
	Memory *MemoryConfig `json:"memory,omitempty"`
}

// MemoryConfig is the memory tool: where its files live and the guard in front of them.
type MemoryConfig struct {
	Root            string   `json:"root"`
	ToolName        string   `json:"toolName"`
	AllowedCommands []string `json:"allowedCommands,omitempty"`
	// ConfirmCommands nil means the default set; empty means none.
	ConfirmCommands []string `json:"confirmCommands"`
	ReadOnly        bool     `json:"readOnly,omitempty"`
	MaxFileBytes    int64    `json:"maxFileBytes"`
	MaxTotalBytes   int64    `json:"maxTotalBytes"`
	TrashRetention  Duration `json:"trashRetention"`
}

// ServerInfo is reported to clients in the initialize answer.
type ServerInfo struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Instructions string `json:"instructions,omitempty"`
}

// Tool is one MCP tool and its backend; exactly one backend is set.
type Tool struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	InputSchema json.RawMessage  `json:"inputSchema"`
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	Template    *TemplateBackend `json:"template,omitempty"`
	HTTP        *HTTPBackend     `json:"http,omitempty"`
	// Remote re-exports a tool of a remote MCP server (a RemoteToolImport): the
	// adapter is then a gateway for it.
	Remote *RemoteBackend `json:"remote,omitempty"`
}

// RemoteBackend forwards tools/call to a tool of a remote MCP server. Tools with the
// same URL, transport, header files and CA file share one pooled client session.
type RemoteBackend struct {
	// Import is "namespace/name" of the RemoteToolImport, for messages and logs.
	Import string `json:"import"`
	// URL is the remote MCP endpoint (http or https, with a host).
	URL string `json:"url"`
	// Transport is TransportStreamableHTTP or TransportSSE.
	Transport string `json:"transport"`
	// RemoteName is the tool's name at the remote; the served name (Tool.Name) may
	// carry a prefix or a rename.
	RemoteName string `json:"remoteName"`
	// HeaderFiles maps a header name to the file holding its value (mounted from a
	// Secret; the config itself lives in a ConfigMap and never holds the value). The
	// value is the file's content without surrounding whitespace; a changed file is
	// picked up by the next call.
	HeaderFiles map[string]string `json:"headerFiles,omitempty"`
	// CAFile, when set, is a PEM bundle: the only CAs TLS to the remote trusts.
	CAFile string `json:"caFile,omitempty"`
	// Timeout bounds one call, reconnecting included.
	Timeout Duration `json:"timeout"`
	// Addresses, when set, are the only IP addresses the adapter connects to for the
	// URL's host: those the operator's ToolSourcePolicy check resolved and accepted. A
	// DNS answer that changed since that check is not followed.
	Addresses []string `json:"addresses,omitempty"`
	// Definition is the remote's tools/list entry without its name (title,
	// description, inputSchema, outputSchema, annotations, icons, _meta, …). When set,
	// tools/list serves it as is with Tool.Name, so clients see the tool exactly as the
	// remote defined it; Description and InputSchema still drive validation.
	Definition json.RawMessage `json:"definition,omitempty"`
}

// ToolAnnotations are the MCP tool hints.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// TemplateBackend renders Text (Go text/template) over the arguments.
type TemplateBackend struct {
	Text string `json:"text"`
}

// HTTPBackend POSTs the arguments as JSON to URL.
type HTTPBackend struct {
	URL              string   `json:"url"`
	Timeout          Duration `json:"timeout"`
	MaxResponseBytes int64    `json:"maxResponseBytes"`
}

// Duration is a time.Duration written as "10s" in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"10s\": %w", err)
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parse duration %q: %w", s, err)
	}
	d.Duration = parsed
	return nil
}

// Load reads a Config from a JSON file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read adapter config: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse adapter config %s: %w", path, err)
	}
	return &cfg, nil
}
