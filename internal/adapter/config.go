// Package adapter is the MCP server that runs in every SkillServer pod (and in the
// manager process under the local runtime). It serves the tools of one rendered Config.
package adapter

import "github.com/cantus-dev/cantus-operator/internal/adapterconfig"

// The config contract is defined in package adapterconfig, which the operator imports
// without linking this server; these names keep the server's code and its callers
// reading as before.
type (
	// Config is adapterconfig.Config.
	Config = adapterconfig.Config
	// MemoryConfig is adapterconfig.MemoryConfig.
	MemoryConfig = adapterconfig.MemoryConfig
	// ServerInfo is adapterconfig.ServerInfo.
	ServerInfo = adapterconfig.ServerInfo
	// Tool is adapterconfig.Tool.
	Tool = adapterconfig.Tool
	// RemoteBackend is adapterconfig.RemoteBackend.
	RemoteBackend = adapterconfig.RemoteBackend
	// ToolAnnotations is adapterconfig.ToolAnnotations.
	ToolAnnotations = adapterconfig.ToolAnnotations
	// TemplateBackend is adapterconfig.TemplateBackend.
	TemplateBackend = adapterconfig.TemplateBackend
	// HTTPBackend is adapterconfig.HTTPBackend.
	HTTPBackend = adapterconfig.HTTPBackend
	// Duration is adapterconfig.Duration.
	Duration = adapterconfig.Duration
	// Limits is adapterconfig.Limits.
	Limits = adapterconfig.Limits
	// WithheldTool is a tool not served until its definition is approved.
	WithheldTool = adapterconfig.WithheldTool
)

// Transports and paths, as in the config contract.
const (
	TransportStreamableHTTP = adapterconfig.TransportStreamableHTTP
	TransportSSE            = adapterconfig.TransportSSE

	PathMCP     = adapterconfig.PathMCP
	PathSSE     = adapterconfig.PathSSE
	PathMessage = adapterconfig.PathMessage
	PathHealthz = adapterconfig.PathHealthz
	PathReadyz  = adapterconfig.PathReadyz
	PathMetrics = adapterconfig.PathMetrics
)
