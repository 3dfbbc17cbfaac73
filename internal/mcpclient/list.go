package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/clip"
	"github.com/cantus-dev/cantus-operator/internal/definition"
)

// A listing is one of MCP's paged list methods: tools/list now; prompts/list,
// resources/list, resources/templates/list and skills/list are each a listing and a
// parse of their entries away.
type listing struct {
	method string // "tools/list"
	member string // the array of entries each page holds: "tools"
	key    string // the member that names an entry, unique in the listing: "name" ("uri" for a resource)
	// item is the kind of the entries: an entry spelling one of its members in another
	// case is refused (with refused).
	item definition.ItemKind
	// refused is the Reason when the server refuses the listing or pages it without
	// end.
	refused string
}

var toolsListing = listing{method: "tools/list", member: "tools", key: "name", item: definition.ToolKind, refused: ReasonToolsListFailed}

// list asks for every page of l (passing each nextCursor back as given) and returns the
// entries as sent, in the server's order. It accepts at most limit entries
// (ResponseTooLarge beyond) and limit+1 pages, as a page must bring an entry or end
// the listing; every answer is bounded by MaxMessageBytes. Each entry must be an
// object whose key is a string, unique in the listing (ProtocolError). A JSON-RPC error,
// a cursor sent twice, or an entry spelling a member of its kind in another case (see
// definition.ItemKind.CheckSpelling) fails with l.refused.
func (s *Session) list(ctx context.Context, l listing, limit int) ([]json.RawMessage, error) {
	entries := []json.RawMessage{}
	seenKeys := map[string]bool{}
	seenCursors := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		raw, err := s.request(ctx, l.method, params, nil)
		if err != nil {
			var rpcErr *RPCError
			if errors.As(err, &rpcErr) {
				return nil, s.c.fail(l.refused, fmt.Sprintf("server refused %s (page %d): %s", l.method, page, clip.Line(rpcErr.Error(), 200)), err)
			}
			return nil, err
		}
		var result map[string]json.RawMessage
		if err := json.Unmarshal(raw, &result); err != nil {
			return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("the answer to %s (page %d) is not a list result: %s", l.method, page, jsonErrorText(err)), err)
		}
		var pageEntries []json.RawMessage
		if err := json.Unmarshal(result[l.member], &pageEntries); err != nil || pageEntries == nil {
			return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("the answer to %s (page %d) has no %s array", l.method, page, l.member), err)
		}
		if len(entries)+len(pageEntries) > limit {
			return nil, s.c.fail(ReasonResponseTooLarge, fmt.Sprintf("server lists more than %d %s (the limit); page %d brought the count to %d",
				limit, l.member, page, len(entries)+len(pageEntries)), nil)
		}
		for i, entry := range pageEntries {
			members, key, err := entryMembers(entry, l.key)
			if err != nil {
				return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("entry %d of %s page %d: %v", i, l.method, page, err), err)
			}
			if err := l.item.CheckMemberSpelling(members); err != nil {
				return nil, s.c.fail(l.refused, fmt.Sprintf("the %s %q of %s: %v", l.item.Name, clip.Line(key, 80), l.method, err), err)
			}
			if seenKeys[key] {
				return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("server lists the %s %q twice in %s", l.key, clip.Line(key, 80), l.method), nil)
			}
			seenKeys[key] = true
			entries = append(entries, entry)
		}
		next, err := nextCursor(result["nextCursor"])
		if err != nil {
			return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("the nextCursor of %s (page %d) is not a string", l.method, page), err)
		}
		if next == "" {
			return entries, nil
		}
		if seenCursors[next] {
			return nil, s.c.fail(l.refused, fmt.Sprintf("server sent the same %s cursor twice (page %d); stopped to avoid a loop", l.method, page), nil)
		}
		seenCursors[next] = true
		if page > limit {
			return nil, s.c.fail(l.refused, fmt.Sprintf("%s did not end within %d pages", l.method, limit+1), nil)
		}
		cursor = next
	}
}

// nextCursor reads a page's nextCursor: "" when it is absent or null.
func nextCursor(raw json.RawMessage) (string, error) {
	var cursor *string
	if len(raw) == 0 {
		return "", nil
	}
	if err := json.Unmarshal(raw, &cursor); err != nil || cursor == nil {
		return "", err
	}
	return *cursor, nil
}

// entryKey is the string member key of a list entry.
func entryKey(entry json.RawMessage, key string) (string, error) {
	_, name, err := entryMembers(entry, key)
	return name, err
}

// entryMembers are the members of a list entry, by their exact names, and its string
// member key.
func entryMembers(entry json.RawMessage, key string) (map[string]json.RawMessage, string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(entry, &members); err != nil || members == nil {
		return nil, "", errors.New("not an object")
	}
	var name string
	if err := json.Unmarshal(members[key], &name); err != nil || name == "" {
		return nil, "", fmt.Errorf("no %s", key)
	}
	return members, name, nil
}

// Tool is one entry of tools/list.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema holds the bytes exactly as the server sent them (nil if absent).
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Raw is the whole tools/list entry as sent (title, annotations, outputSchema, …).
	Raw json.RawMessage `json:"-"`
}

// ListTools lists the server's tools through every page of tools/list, at most limit
// of them (DefaultMaxTools when limit ≤ 0), bounded as list says. The error is an
// *Error: ToolsListFailed when the server refuses the listing or loops.
func (s *Session) ListTools(ctx context.Context, limit int) ([]Tool, error) {
	if limit <= 0 {
		limit = DefaultMaxTools
	}
	entries, err := s.list(ctx, toolsListing, limit)
	if err != nil {
		return nil, err
	}
	tools := make([]Tool, 0, len(entries))
	for i, entry := range entries {
		t, err := parseTool(entry)
		if err != nil {
			return nil, s.c.fail(ReasonProtocolError, fmt.Sprintf("tool %d of tools/list: %s", i, jsonErrorText(err)), err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// parseTool reads an entry that list checked has a name. Its members are read from the
// entry's members by their exact names, as the digest reads them: a decoding into a
// struct would also take "Description" for "description" (and the last of the two),
// so that the tool served would not be the tool digested.
func parseTool(entry json.RawMessage) (Tool, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(entry, &members); err != nil {
		return Tool{}, err
	}
	tool := Tool{Raw: entry}
	if err := json.Unmarshal(members["name"], &tool.Name); err != nil {
		return Tool{}, fmt.Errorf("name: %w", err)
	}
	if raw := members["description"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &tool.Description); err != nil {
			return Tool{}, fmt.Errorf("description: %w", err)
		}
	}
	if raw := members["inputSchema"]; len(raw) > 0 && string(raw) != "null" {
		tool.InputSchema = raw
	}
	return tool, nil
}
