package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/definition"
)

// extensionNames are the sorted names of a capabilities.extensions object; none when
// it is absent or not an object.
func extensionNames(raw json.RawMessage) []string {
	var extensions map[string]json.RawMessage
	if json.Unmarshal(raw, &extensions) != nil {
		return nil
	}
	names := make([]string, 0, len(extensions))
	for name := range extensions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// DefaultMaxContentItems bounds the entries a Probe accepts from each of prompts/list,
// resources/list and resources/templates/list, over all pages.
const DefaultMaxContentItems = 1000

var (
	resourcesListing         = listing{method: "resources/list", member: "resources", key: "uri", item: definition.ResourceKind, refused: ReasonContentListFailed}
	resourceTemplatesListing = listing{method: "resources/templates/list", member: "resourceTemplates", key: "uriTemplate", item: definition.ResourceTemplateKind, refused: ReasonContentListFailed}
)

// Content is what a server serves besides tools, each list entry as sent, in the
// server's order.
type Content struct {
	Prompts           []json.RawMessage `json:"prompts,omitempty"`
	Resources         []json.RawMessage `json:"resources,omitempty"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates,omitempty"`
	// Skills are the skills/list entries of a server announcing the Skills extension.
	Skills []json.RawMessage `json:"skills,omitempty"`
	// Failed holds, by method ("prompts/list", …), why a listing failed. A failed
	// listing does not fail the handshake: the tools are served without it, and its
	// list stays empty here.
	Failed map[string]string `json:"failed,omitempty"`
}

// Empty says the server serves none of it (or it was not listed).
func (c Content) Empty() bool {
	return len(c.Prompts) == 0 && len(c.Resources) == 0 && len(c.ResourceTemplates) == 0 && len(c.Skills) == 0
}

// ListResources returns every resources/list entry as sent, at most limit of them.
func (s *Session) ListResources(ctx context.Context, limit int) ([]json.RawMessage, error) {
	return s.list(ctx, resourcesListing, limit)
}

// ListResourceTemplates returns every resources/templates/list entry as sent, at most
// limit of them.
func (s *Session) ListResourceTemplates(ctx context.Context, limit int) ([]json.RawMessage, error) {
	return s.list(ctx, resourceTemplatesListing, limit)
}

// ReadResource sends resources/read for uri and returns the result as the server sent
// it.
func (s *Session) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	return s.request(ctx, string(mcp.MethodResourcesRead), map[string]string{"uri": uri}, nil)
}

// ReadDirectory sends resources/directory/read (the Skills extension) for uri and
// returns the result as the server sent it.
func (s *Session) ReadDirectory(ctx context.Context, uri string) (json.RawMessage, error) {
	return s.request(ctx, "resources/directory/read", map[string]string{"uri": uri}, nil)
}

// GetPrompt sends prompts/get for name with args (a JSON object, or empty for none) and
// returns the result as the server sent it.
func (s *Session) GetPrompt(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return s.GetPromptWith(ctx, name, args, InputAnswers{})
}

// GetPromptWith is GetPrompt on the retry of a prompts/get the server answered with an
// input-required result: answers go with it.
func (s *Session) GetPromptWith(ctx context.Context, name string, args json.RawMessage, answers InputAnswers) (json.RawMessage, error) {
	params := map[string]any{"name": name}
	if len(answers.InputResponses) > 0 {
		params["inputResponses"] = answers.InputResponses
	}
	if answers.RequestState != "" {
		params["requestState"] = answers.RequestState
	}
	if len(args) > 0 && string(args) != "null" {
		if !json.Valid(args) {
			return nil, &Error{Reason: ReasonInvalidConfig, Detail: "the prompt arguments are not JSON", NotProcessed: true}
		}
		params["arguments"] = args
	}
	return s.request(ctx, string(mcp.MethodPromptsGet), params, nil)
}

// Complete sends completion/complete with params (ref, argument, context) and returns
// the result as the server sent it.
func (s *Session) Complete(ctx context.Context, params any) (json.RawMessage, error) {
	return s.request(ctx, string(mcp.MethodCompletionComplete), params, nil)
}

// listContent lists what the server announced it serves besides tools: prompts when it
// announced prompts, resources and resource templates when it announced resources,
// skills when it announced the Skills extension. A
// listing the server does not implement (method not found) lists nothing; any other
// failure is recorded in Failed.
func listContent(ctx context.Context, s *Session, info ServerInfo, limit int) Content {
	if limit <= 0 {
		limit = DefaultMaxContentItems
	}
	var c Content
	fail := func(method string, err error) {
		if c.Failed == nil {
			c.Failed = map[string]string{}
		}
		c.Failed[method] = err.Error()
	}
	each := []struct {
		capability string
		l          listing
		into       *[]json.RawMessage
	}{
		{"prompts", promptsListing, &c.Prompts},
		{"resources", resourcesListing, &c.Resources},
		{"resources", resourceTemplatesListing, &c.ResourceTemplates},
		{definition.SkillsExtension, skillsListing, &c.Skills},
	}
	announced := slices.Concat(info.Capabilities, info.Extensions)
	for _, k := range each {
		if !slices.Contains(announced, k.capability) {
			continue
		}
		entries, err := s.list(ctx, k.l, limit)
		switch {
		case err == nil:
			*k.into = entries
		case !methodNotFound(err):
			fail(k.l.method, err)
		}
	}
	return c
}

// methodNotFound says err is the server's JSON-RPC "method not found".
func methodNotFound(err error) bool {
	var rpcErr *RPCError
	return errors.As(err, &rpcErr) && rpcErr.Code == mcp.METHOD_NOT_FOUND
}

// CatalogDigest is the digest of everything a server serves: Digest(tools) when it
// serves nothing else, so that an import serving only tools keeps the catalogDigest it
// always had; otherwise the sha256 (hex) of the canonical JSON of the tools (as Digest
// takes them) and of each other kind's entries, each kind sorted by its key (name, uri,
// uriTemplate, uri). Like Digest, any change to an entry changes it, _meta included.
func CatalogDigest(tools []Tool, c Content) string {
	if c.Empty() {
		return Digest(tools)
	}
	return definition.Sum(map[string]any{
		"tools":             canonicalTools(tools),
		"prompts":           canonicalEntries(c.Prompts, "name"),
		"resources":         canonicalEntries(c.Resources, "uri"),
		"resourceTemplates": canonicalEntries(c.ResourceTemplates, "uriTemplate"),
		"skills":            canonicalEntries(c.Skills, "uri"),
	})
}

// canonicalEntries decodes entries (as definition.Decode) sorted by their key member.
func canonicalEntries(entries []json.RawMessage, key string) []any {
	type keyed struct {
		key string
		v   any
	}
	out := make([]keyed, 0, len(entries))
	for _, e := range entries {
		v, ok := definition.Decode(e)
		if !ok {
			continue
		}
		k, _ := entryKey(e, key)
		out = append(out, keyed{key: k, v: v})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].key < out[j].key })
	vs := make([]any, 0, len(out))
	for _, k := range out {
		vs = append(vs, k.v)
	}
	return vs
}
