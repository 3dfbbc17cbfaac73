package adapter

import "github.com/cantus-dev/cantus-operator/internal/adapterconfig"

// servesTasks says whether a remote the gateway serves offers the Tasks extension
// (io.modelcontextprotocol/tasks): the gateway's server/discover then advertises it.
// mcp-go sets a server's capabilities once, when it is made, so a reload that brings
// the first such remote advertises it only from the next start; its tasks pass
// through before that all the same, to callers that declare the extension.
func servesTasks(cfg *adapterconfig.Config) bool {
	for _, t := range cfg.Tools {
		if t.Remote != nil && t.Remote.ServesTasks() {
			return true
		}
	}
	return false
}
