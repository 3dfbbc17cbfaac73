package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Imported prompts, resources and resource templates are listed exactly as their remote
// listed them, as imported tools are (definitions.go): mcp-go builds each list entry
// from its typed struct, which drops what it does not know and members such as a
// prompt argument's "required": false. The answer to a prompts/list, resources/list or
// resources/templates/list is rewritten on its way out: each imported entry is replaced
// by the remote's definition (a prompt's with its served name).

// ContentDefinitions are the list entries of imported content, by list member and key.
type ContentDefinitions struct {
	// byMember maps "prompts", "resources" and "resourceTemplates" to the entries of
	// that list by their key (name, uri, uriTemplate).
	byMember map[string]map[string]json.RawMessage
}

// contentListKeys are the lists rewritten and the member naming their entries.
var contentListKeys = map[string]string{"prompts": "name", "resources": "uri", "resourceTemplates": "uriTemplate"}

// Add records the served entry of one item of the list member.
func (d *ContentDefinitions) Add(member, key string, entry json.RawMessage) {
	if d.byMember == nil {
		d.byMember = map[string]map[string]json.RawMessage{}
	}
	if d.byMember[member] == nil {
		d.byMember[member] = map[string]json.RawMessage{}
	}
	d.byMember[member][key] = entry
}

// Empty says there is nothing to rewrite.
func (d *ContentDefinitions) Empty() bool { return d == nil || len(d.byMember) == 0 }

// MayListContent is false for a body that cannot be a request for one of the lists
// rewritten, so that the gate need not parse it. It is a shortcut for speed and guards
// no security decision: a list it misses (spelled "prompts\/list") is answered by
// mcp-go's own entries, filtered by the same list hooks.
func MayListContent(body []byte) bool {
	return bytes.Contains(body, []byte("/list")) || bytes.Contains(body, []byte(`\u`))
}

// rewriteMessage replaces the imported entries of msg when it is a successful answer
// holding one of the lists; any other message is returned as is.
func (d *ContentDefinitions) rewriteMessage(msg []byte) []byte {
	return rewriteResult(msg, d.replaceEntries)
}

// replaceEntries replaces the imported entries of the lists a result holds, and says
// whether it replaced any.
func (d *ContentDefinitions) replaceEntries(result map[string]json.RawMessage) bool {
	changed := false
	for member, key := range contentListKeys {
		defs := d.byMember[member]
		var entries []json.RawMessage
		if len(defs) == 0 || json.Unmarshal(result[member], &entries) != nil || entries == nil {
			continue
		}
		for i, entry := range entries {
			var head map[string]json.RawMessage
			var k string
			if json.Unmarshal(entry, &head) != nil || json.Unmarshal(head[key], &k) != nil {
				continue
			}
			if def, ok := defs[k]; ok {
				entries[i], changed = def, true
			}
		}
		result[member], _ = json.Marshal(entries)
	}
	return changed
}

// NewContentListWriter rewrites the prompts, resources or resource templates list
// written to w with defs; an event stream (which mcp-go does not use for these
// answers) is written through as is.
func NewContentListWriter(w http.ResponseWriter, defs *ContentDefinitions) *AnswerRewriter {
	return &AnswerRewriter{ResponseWriter: w, message: defs.rewriteMessage}
}
