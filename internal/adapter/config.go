// Package adapter is the MCP server that runs in every SkillServer pod (and in the
// manager process under the local runtime). It serves the tools of one rendered Config.
package adapter

import "github.com/cantus-dev/cantus-operator/internal/adapterconfig"

// The config contract is defined in package adapterconfig, which the operator imports
// without linking this server; these names keep the server's code and its callers
// reading as before.
type (
	Config          = adapterconfig.Config
	MemoryConfig    = adapterconfig.MemoryConfig
	ServerInfo      = adapterconfig.ServerInfo
	Tool            = adapterconfig.Tool
	RemoteBackend   = adapterconfig.RemoteBackend
	ToolAnnotations = adapterconfig.ToolAnnotations
	TemplateBackend = adapterconfig.TemplateBackend
	HTTPBackend     = adapterconfig.HTTPBackend
	Duration        = adapterconfig.Duration
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
