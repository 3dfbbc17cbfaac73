package controller

import (
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/clip"
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
	maxRemoteTitleBytes       = 1 << 10
	// Per tool, the raw members past these sizes are left out (and named in Clipped).
	maxRemoteAnnotationsBytes  = 4 << 10
	maxRemoteOutputSchemaBytes = 64 << 10
	maxRemoteOtherFieldsBytes  = 16 << 10
	maxRemoteCapabilities      = 32
	// maxStatusToolsBytes bounds the tools kept in status with their schemas; past it,
	// input schemas are left out (names and descriptions stay).
	maxStatusToolsBytes = 256 << 10
	// maxStatusToolListBytes bounds the tool list even without schemas; past it, the
	// remaining tools are left out of the status.
	maxStatusToolListBytes = 512 << 10
)

func remoteServerInfo(res *mcpclient.Result) *cantusv1alpha1.RemoteServerInfo {
	return &cantusv1alpha1.RemoteServerInfo{
		Name:            clip.Bytes(res.ServerName, maxRemoteNameBytes),
		Version:         clip.Bytes(res.ServerVersion, maxRemoteVersionBytes),
		ProtocolVersion: clip.Bytes(res.ProtocolVersion, maxRemoteVersionBytes),
		Capabilities:    clippedCapabilityNames(res.Capabilities),
		Extensions:      remoteExtensions(res),
	}
}

// clippedCapabilityNames are at most maxRemoteCapabilities of names, each clipped.
func clippedCapabilityNames(names []string) []string {
	if len(names) > maxRemoteCapabilities {
		names = names[:maxRemoteCapabilities]
	}
	clipped := make([]string, 0, len(names))
	for _, c := range names {
		clipped = append(clipped, clip.Bytes(c, maxRemoteVersionBytes))
	}
	return clipped
}

// remoteExtensions are the extensions the remote announced in either era, sorted;
// nil for none.
func remoteExtensions(res *mcpclient.Result) []string {
	all := slices.Concat(res.Extensions, res.ModernExtensions)
	if len(all) == 0 {
		return nil
	}
	slices.Sort(all)
	return clippedCapabilityNames(slices.Compact(all))
}

// statusTools keeps the tools (names, titles and descriptions clipped, other members
// left out past their limits and named in Clipped) with their schemas while they fit
// maxStatusToolsBytes, else without schemas while they fit maxStatusToolListBytes;
// truncated says schemas or tools were left out.
func statusTools(tools []mcpclient.Tool) (out []cantusv1alpha1.DiscoveredTool, truncated bool) {
	out = make([]cantusv1alpha1.DiscoveredTool, 0, len(tools))
	size := 0
	for _, t := range tools {
		d := discoveredTool(t)
		out = append(out, d)
		size += len(d.Name) + len(d.Title) + len(d.Description) + rawSize(d.InputSchema) +
			rawSize(d.Annotations) + rawSize(d.OutputSchema) + rawSize(d.OtherFields)
	}
	if size <= maxStatusToolsBytes {
		return out, false
	}
	size = 0
	for i := range out {
		out[i].InputSchema, out[i].OutputSchema, out[i].OtherFields = nil, nil, nil
		if size += len(out[i].Name) + len(out[i].Title) + len(out[i].Description) + rawSize(out[i].Annotations); size > maxStatusToolListBytes {
			return out[:i], true
		}
	}
	return out, true
}

// definitionMembers are the members of a tool definition that DiscoveredTool holds in
// fields of their own; the others go to OtherFields.
var definitionMembers = map[string]bool{
	"name": true, "title": true, "description": true, "inputSchema": true, "annotations": true, "outputSchema": true,
}

// discoveredTool is t as the status records it: each member of the remote's
// definition in its field, clipped or left out past its limit.
func discoveredTool(t mcpclient.Tool) cantusv1alpha1.DiscoveredTool {
	d := cantusv1alpha1.DiscoveredTool{
		Name:        clip.Bytes(t.Name, maxRemoteNameBytes),
		Description: clip.Bytes(t.Description, maxRemoteDescriptionBytes),
		InputSchema: &runtime.RawExtension{Raw: t.InputSchema},
	}
	if d.Description != t.Description {
		d.Clipped = append(d.Clipped, "description")
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(t.Raw, &members) != nil {
		return d
	}
	var title string
	if json.Unmarshal(members["title"], &title) == nil && title != "" {
		if d.Title = clip.Bytes(title, maxRemoteTitleBytes); d.Title != title {
			d.Clipped = append(d.Clipped, "title")
		}
	}
	d.Annotations = keepRaw(members["annotations"], maxRemoteAnnotationsBytes, "annotations", &d.Clipped)
	d.OutputSchema = keepRaw(members["outputSchema"], maxRemoteOutputSchemaBytes, "outputSchema", &d.Clipped)
	others := map[string]json.RawMessage{}
	for name, value := range members {
		if !definitionMembers[name] {
			others[name] = value
		}
	}
	if len(others) > 0 {
		raw, _ := json.Marshal(others) // raw values of a decoded object marshal again
		d.OtherFields = keepRaw(raw, maxRemoteOtherFieldsBytes, "otherFields", &d.Clipped)
	}
	return d
}

// keepRaw returns raw for the status, or nil (naming it in clipped) when it is larger
// than limit; an absent or null member is nil.
func keepRaw(raw json.RawMessage, limit int, name string, clipped *[]string) *runtime.RawExtension {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if len(raw) > limit {
		*clipped = append(*clipped, name)
		return nil
	}
	return &runtime.RawExtension{Raw: raw}
}

func rawSize(r *runtime.RawExtension) int {
	if r == nil {
		return 0
	}
	return len(r.Raw)
}
