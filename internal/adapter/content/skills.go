package content

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
)

// mcp-go v1.2.1 routes only the methods it knows, so the Skills extension's methods
// (skills/list, skills/get, resources/directory/read) are answered here, where the
// adapter reads each streamable HTTP POST before mcp-go does. The same place answers
// the errors whose JSON-RPC code mcp-go cannot give from a handler (it answers every
// handler error with -32603): an unknown resource, a refused read or get, and a missing
// required prompt argument, all -32602 (invalid params). Everything else goes on to
// mcp-go.

// Methods of the Skills extension.
const (
	methodSkillsList    = "skills/list"
	methodSkillsGet     = "skills/get"
	methodDirectoryRead = "resources/directory/read"
)

// Pages of skills/list and resources/directory/read: at most pageEntries entries, and
// no more once pageBytes are reached (an entry is never split, so one large entry still
// makes a page of its own).
const (
	pageEntries = 100
	pageBytes   = 1 << 20
)

// Caching hints (SEP-2549) on the answers given here, as mcp-go gives them on its own
// lists by default: revalidate every time (a reload can change anything), and private,
// since what a caller sees depends on its authorization.
const (
	cacheTTLMs = 0
	cacheScope = "private"
)

// contentRequest is a request this file may answer.
type contentRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		URI       string            `json:"uri"`
		Cursor    string            `json:"cursor"`
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
		// A retry of a prompts/get the remote answered with an input-required result.
		InputResponses json.RawMessage            `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
		Meta           map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
	// modern is true for a request of protocol 2026-07-28 or later (jsonrpc.ModernRequest).
	modern bool
}

// mayBeContentRequest is false for most bodies that cannot be one, so that they are
// not parsed twice. It is a shortcut for speed and guards no security decision: a
// request it misses (spelled "resources\/read") goes to mcp-go, whose handlers check
// the caller's rules as answerContentRequest does (and which knows no skills/ method,
// and relays no subscription).
func mayBeContentRequest(body []byte) bool {
	return bytes.Contains(body, []byte("skills/")) || bytes.Contains(body, []byte("resources/")) ||
		bytes.Contains(body, []byte("prompts/get"))
}

// serveContentRequest answers body when it is a request this file answers, and reports
// whether it did; when it did not, nothing was written.
func (cp *Part) serveContentRequest(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if cp.streamable == nil || !mayBeContentRequest(body) || !gateway.JSONContentType(r.Header.Get("Content-Type")) {
		return false
	}
	var req contentRequest
	if json.Unmarshal(body, &req) != nil || req.JSONRPC != mcp.JSONRPC_VERSION || !gateway.ValidRequestID(req.ID) {
		return false
	}
	req.modern = jsonrpc.ModernRequest(body)
	if !cp.cfg.Stateless && r.Header.Get("Mcp-Session-Id") == "" && !req.modern {
		// A stateful session's request without its session: mcp-go says what is wrong.
		return false
	}
	if cp.subscriptions.Answer(w, r, req.ID, req.Method, req.Params.URI, req.modern) || cp.answerImported(w, r, &req) {
		return true
	}
	answer := cp.answerContentRequest(r, &req)
	if answer == nil {
		return false
	}
	answer.ID = req.ID
	jsonrpc.Write(w, answer)
	return true
}

// answerContentRequest is the answer to req, or nil for mcp-go to answer it.
func (cp *Part) answerContentRequest(r *http.Request, req *contentRequest) *jsonrpc.Answer {
	switch req.Method {
	case methodSkillsList, methodSkillsGet, methodDirectoryRead:
		if !cp.servesSkillMethods() {
			return nil // mcp-go answers "method not found"
		}
	}
	ctx := r.Context()
	switch req.Method {
	case methodSkillsList:
		return cp.listSkills(r, req.Params.Cursor)
	case methodSkillsGet:
		return cp.getSkill(r, req.Params.URI)
	case methodDirectoryRead:
		return cp.readDirectory(r, req.Params.URI, req.Params.Cursor)
	case string(mcp.MethodResourcesRead):
		return cp.checkRead(r, req.Params.URI)
	case string(mcp.MethodPromptsGet):
		p := cp.set.Load().promptByName[req.Params.Name]
		switch {
		case p == nil:
			return nil
		case !cp.filter.Allows(ctx, access.ItemPrompt, p.Name):
			cp.filter.LogRead(ctx, "prompts/get", p.Name, jsonrpc.OutcomeRefused)
			return jsonrpc.Refused("prompt " + p.Name)
		}
		if missing := missingArgument(p, req.Params.Arguments); missing != "" {
			return jsonrpc.InvalidParams("prompt " + quote(p.Name) + " needs the argument " + quote(missing))
		}
	}
	return nil
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// checkRead answers a resources/read that mcp-go would answer with another code than
// -32602: an unknown URI (SEP-2164) and a refused read.
func (cp *Part) checkRead(r *http.Request, uri string) *jsonrpc.Answer {
	set := cp.set.Load()
	if set.files[uri] == nil && !set.matchesTemplate(uri) && set.imported.resourceFor(uri) == nil {
		answer := jsonrpc.InvalidParams("no resource is served at " + uri)
		answer.Error.Data = map[string]string{"uri": uri}
		return answer
	}
	if kind, name := cp.set.Load().resourceItem(uri); !cp.filter.Allows(r.Context(), kind, name) {
		cp.filter.LogRead(r.Context(), "resources/read", uri, jsonrpc.OutcomeRefused)
		return jsonrpc.Refused("resource " + uri)
	}
	return nil
}

func (c *Set) matchesTemplate(uri string) bool {
	return slices.ContainsFunc(c.templates, func(t *servedTemplate) bool { return t.matcher.Match(uri) != nil })
}

// listSkills answers skills/list: the entries the caller may see, sorted by URI, from
// the one after the cursor's.
func (cp *Part) listSkills(r *http.Request, cursor string) *jsonrpc.Answer {
	after, ok := decodeCursor(cursor)
	if !ok {
		return jsonrpc.InvalidParams("the cursor is not one this server gave")
	}
	page := make([]json.RawMessage, 0)
	size, more := 0, false
	for _, skill := range cp.set.Load().skills {
		if skill.uri <= after || !cp.filter.Allows(r.Context(), access.ItemSkill, skill.path) {
			continue
		}
		if len(page) == pageEntries || (len(page) > 0 && size+len(skill.entry) > pageBytes) {
			more = true
			break
		}
		page = append(page, skill.entry)
		size += len(skill.entry)
		after = skill.uri
	}
	next := ""
	if more {
		next = encodeCursor(after)
	}
	return &jsonrpc.Answer{Result: pagedResult("skills", page, next)}
}

// pagedResult is a result with one list and the caching hints.
func pagedResult[T any](field string, items []T, next string) map[string]any {
	result := map[string]any{"resultType": "complete", field: items, "ttlMs": cacheTTLMs, "cacheScope": cacheScope}
	if next != "" {
		result["nextCursor"] = next
	}
	return result
}

// encodeCursor is the cursor of the page after the entry whose key is last: the key
// itself, so a page stays right when a reload adds or removes entries before it.
func encodeCursor(last string) string { return base64.RawURLEncoding.EncodeToString([]byte(last)) }

// decodeCursor is the key the page starts after; "" starts at the beginning.
func decodeCursor(cursor string) (string, bool) {
	if cursor == "" {
		return "", true
	}
	after, err := base64.RawURLEncoding.DecodeString(cursor)
	return string(after), err == nil && len(after) > 0
}

// getSkill answers skills/get.
func (cp *Part) getSkill(r *http.Request, uri string) *jsonrpc.Answer {
	skill := cp.set.Load().skillByURI[uri]
	if skill == nil {
		return jsonrpc.InvalidParams("no skill is served at " + uri)
	}
	if !cp.filter.Allows(r.Context(), access.ItemSkill, skill.path) {
		cp.filter.LogRead(r.Context(), methodSkillsGet, uri, jsonrpc.OutcomeRefused)
		return jsonrpc.Refused("skill " + skill.path)
	}
	return &jsonrpc.Answer{Result: map[string]any{"resultType": "complete", "skill": skill.entry, "ttlMs": cacheTTLMs, "cacheScope": cacheScope}}
}

// readDirectory answers resources/directory/read: the direct children of a skill's
// directory, sorted by URI, from the one after the cursor's.
func (cp *Part) readDirectory(r *http.Request, uri, cursor string) *jsonrpc.Answer {
	dir := cp.set.Load().dirs[uri]
	if dir == nil {
		return jsonrpc.InvalidParams(uri + " is not a directory resource this server serves")
	}
	if !cp.filter.Allows(r.Context(), access.ItemSkill, dir.skillPath) {
		cp.filter.LogRead(r.Context(), methodDirectoryRead, uri, jsonrpc.OutcomeRefused)
		return jsonrpc.Refused("skill " + dir.skillPath)
	}
	after, ok := decodeCursor(cursor)
	if !ok {
		return jsonrpc.InvalidParams("the cursor is not one this server gave")
	}
	start := sort.Search(len(dir.children), func(i int) bool { return dir.children[i].URI > after })
	end := min(start+pageEntries, len(dir.children))
	next := ""
	if end < len(dir.children) {
		next = encodeCursor(dir.children[end-1].URI)
	}
	return &jsonrpc.Answer{Result: pagedResult("resources", dir.children[start:end], next)}
}
