package controller

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A remote MCP server is not trusted: whatever it sends is bounded before it goes into a
// status, a condition message or an event, so that a 40 KB server name or megabytes of
// descriptions cannot make the status patch fail (and the import retry forever) or fill
// etcd. Clipped values end with "…"; tools are never dropped silently (toolCount stays
// the remote's count and toolsTruncated says the list is incomplete).
const (
	maxRemoteNameBytes        = 256
	maxRemoteVersionBytes     = 64
	maxRemoteDescriptionBytes = 4 << 10
	maxRemoteCapabilities     = 32
	// maxStatusToolsBytes bounds the tools kept in status with their schemas; past it,
	// input schemas are left out (names and descriptions stay).
	maxStatusToolsBytes = 256 << 10
	// maxStatusToolListBytes bounds the tool list even without schemas; past it, the
	// remaining tools are left out of the status.
	maxStatusToolListBytes = 512 << 10
)

// clip cuts s to at most max bytes on a character boundary.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit-len("…")], "") + "…"
}

func remoteServerInfo(res *mcpclient.Result) *cantusv1alpha1.RemoteServerInfo {
	caps := res.Capabilities
	if len(caps) > maxRemoteCapabilities {
		caps = caps[:maxRemoteCapabilities]
	}
	clipped := make([]string, 0, len(caps))
	for _, c := range caps {
		clipped = append(clipped, clip(c, maxRemoteVersionBytes))
	}
	return &cantusv1alpha1.RemoteServerInfo{
		Name:            clip(res.ServerName, maxRemoteNameBytes),
		Version:         clip(res.ServerVersion, maxRemoteVersionBytes),
		ProtocolVersion: clip(res.ProtocolVersion, maxRemoteVersionBytes),
		Capabilities:    clipped,
	}
}

// statusTools keeps the tools (names and descriptions clipped) with their schemas while
// they fit maxStatusToolsBytes, else without schemas while they fit
// maxStatusToolListBytes; truncated says schemas or tools were left out.
func statusTools(tools []mcpclient.Tool) (out []cantusv1alpha1.DiscoveredTool, truncated bool) {
	out = make([]cantusv1alpha1.DiscoveredTool, 0, len(tools))
	size := 0
	for _, t := range tools {
		d := cantusv1alpha1.DiscoveredTool{
			Name:        clip(t.Name, maxRemoteNameBytes),
			Description: clip(t.Description, maxRemoteDescriptionBytes),
			InputSchema: &runtime.RawExtension{Raw: t.InputSchema},
		}
		out = append(out, d)
		size += len(d.Name) + len(d.Description) + len(t.InputSchema)
	}
	if size <= maxStatusToolsBytes {
		return out, false
	}
	size = 0
	for i := range out {
		out[i].InputSchema = nil
		if size += len(out[i].Name) + len(out[i].Description); size > maxStatusToolListBytes {
			return out[:i], true
		}
	}
	return out, true
}
