package render

import (
	"encoding/json"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// appView is the ui:// resource of the MCP App view a tool opens, from the members its
// import recorded: _meta.ui.resourceUri, or the flat _meta["ui/resourceUri"] that
// earlier versions of the Apps extension used. "" when it opens none. Members of
// another shape (a remote controls them) open none.
func appView(d cantusv1alpha1.DiscoveredTool) string {
	if d.OtherFields == nil {
		return ""
	}
	var members struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(d.OtherFields.Raw, &members) != nil {
		return ""
	}
	var ui struct {
		ResourceURI string `json:"resourceUri"`
	}
	if json.Unmarshal(members.Meta["ui"], &ui) == nil && ui.ResourceURI != "" {
		return ui.ResourceURI
	}
	var flat string
	if json.Unmarshal(members.Meta["ui/resourceUri"], &flat) == nil {
		return flat
	}
	return ""
}
