package content

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/yosida95/uritemplate/v3"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// What a gateway re-exports of its imports besides tools (cfg.Imported): listed through
// mcp-go beside the server's own content, and read or got from the remote that serves
// it. On streamable HTTP the adapter answers resources/read and prompts/get of an
// imported item itself, with the remote's result as sent (byte for byte); on sse,
// mcp-go's handlers answer from the parsed result.

// importedSet is the imported content of one config.
type importedSet struct {
	prompts      []*importedPrompt // config order
	promptByName map[string]*importedPrompt
	resources    map[string]*importedResource // by URI
	resourceURIs []string                     // sorted
	templates    []*importedTemplate          // config order
	// skills are the imported skills, served with the server's own (skills/list,
	// skills/get); skillOf maps each of their files' URIs (only those in the skill's
	// own directory) to the skill's path, and skillFrom each skill's path to the skill
	// and its import.
	skills    []*servedSkill
	skillOf   map[string]string
	skillFrom map[string]importedSkill
	// defs are the entries as the remotes listed them, served in place of mcp-go's.
	defs gateway.ContentDefinitions
	// skillFiles are the files the skills list, whose reads are checked.
	skillFiles gateway.SkillFiles
}

// importedSkill is an imported skill and the import ("namespace/name") it came from.
type importedSkill struct {
	skill *servedSkill
	from  string
}

type importedPrompt struct {
	item    *gateway.Item
	listing mcp.Prompt
}

type importedResource struct {
	item    *gateway.Item
	listing mcp.Resource
}

type importedTemplate struct {
	item    *gateway.Item
	listing mcp.ResourceTemplate
	matcher *uritemplate.Template
}

// loadImported builds the imported set of cfg, which the config check validated.
func loadImported(c *adapterconfig.ImportedContent) (*importedSet, error) {
	set := &importedSet{promptByName: map[string]*importedPrompt{}, resources: map[string]*importedResource{},
		skillOf: map[string]string{}, skillFrom: map[string]importedSkill{}, skillFiles: gateway.SkillFiles{}}
	if c.Empty() {
		return set, nil
	}
	for i := range c.Skills {
		if err := set.addSkill(&c.Skills[i]); err != nil {
			return nil, err
		}
	}
	err := importEach(set, c.Prompts, "prompt", "prompts", func(it *adapterconfig.ImportedItem, item *gateway.Item, listing mcp.Prompt) error {
		listing.Name = it.Key
		p := &importedPrompt{item: item, listing: listing}
		set.prompts = append(set.prompts, p)
		set.promptByName[it.Key] = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = importEach(set, c.Resources, "resource", "resources", func(it *adapterconfig.ImportedItem, item *gateway.Item, listing mcp.Resource) error {
		listing.URI = it.Key
		set.resources[it.Key] = &importedResource{item: item, listing: listing}
		set.resourceURIs = append(set.resourceURIs, it.Key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(set.resourceURIs)
	err = importEach(set, c.ResourceTemplates, "resource template", "resourceTemplates", func(it *adapterconfig.ImportedItem, item *gateway.Item, listing mcp.ResourceTemplate) error {
		matcher, err := adapterconfig.CompileURITemplate(it.Key)
		if err != nil {
			return fmt.Errorf("imported resource template: %w", err)
		}
		set.templates = append(set.templates, &importedTemplate{item: item, listing: listing, matcher: matcher})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return set, nil
}

// importEach decodes the definition of each item, as the remote listed it, into the
// listing it is served with, keeps the definition for the served list, and gives add
// the item, how the gateway reaches it, and its listing; kind names the item in errors.
func importEach[L any](set *importedSet, items []adapterconfig.ImportedItem, kind, list string, add func(*adapterconfig.ImportedItem, *gateway.Item, L) error) error {
	for i := range items {
		it := &items[i]
		var listing L
		if err := json.Unmarshal(it.Definition, &listing); err != nil {
			return fmt.Errorf("imported %s %q: %w", kind, adapterconfig.ClipName(it.Key), err)
		}
		set.defs.Add(list, it.Key, it.Definition)
		if err := add(it, &gateway.Item{Key: it.Key, RemoteKey: it.RemoteKey, Backend: &it.Remote, Files: set.skillFiles}, listing); err != nil {
			return err
		}
	}
	return nil
}

// items are every imported item, for the pool to link to its remote.
func (set *importedSet) items() []*gateway.Item {
	var out []*gateway.Item
	for _, p := range set.prompts {
		out = append(out, p.item)
	}
	for _, uri := range set.resourceURIs {
		out = append(out, set.resources[uri].item)
	}
	for _, t := range set.templates {
		out = append(out, t.item)
	}
	return out
}

func (set *importedSet) empty() bool {
	return len(set.prompts)+len(set.resources)+len(set.templates)+len(set.skills) == 0
}

// resourceFor is the imported item that serves uri: the resource of that URI, else the
// first template that matches it; nil when none does. A read or subscription of it
// must also pass ambiguity.
func (set *importedSet) resourceFor(uri string) *gateway.Item {
	if r := set.resources[uri]; r != nil {
		return r.item
	}
	for _, t := range set.templates {
		if t.matcher.Match(uri) != nil {
			return t.item
		}
	}
	return nil
}

// markerAmbiguous starts the refusal of a read or subscription of a URI that more than
// one import serves.
const markerAmbiguous = "resource_ambiguous: "

// maxNamedImports bounds the imports an ambiguity names.
const maxNamedImports = 4

// ambiguity is nil when at most one import serves uri (by listing it or by a template
// that matches it); otherwise the error that refuses reading or subscribing to it,
// naming the imports. Letting the first of them serve it would let a remote with a
// broad template ("{+any}"), or one that lists another import's URI, capture the reads
// and subscriptions meant for another import; render refuses only identical keys.
func (set *importedSet) ambiguity(uri string) error {
	var imports []string
	add := func(it *gateway.Item) {
		if !slices.Contains(imports, it.Backend.Import) {
			imports = append(imports, it.Backend.Import)
		}
	}
	if r := set.resources[uri]; r != nil {
		add(r.item)
	}
	for _, t := range set.templates {
		if t.matcher.Match(uri) != nil {
			add(t.item)
		}
	}
	if len(imports) < 2 {
		return nil
	}
	named := strings.Join(imports[:min(len(imports), maxNamedImports)], " and ")
	if len(imports) > maxNamedImports {
		named += fmt.Sprintf(" and %d more", len(imports)-maxNamedImports)
	}
	return fmt.Errorf("%sresource %s is served by more than one import of this gateway (%s), so by none: ask the owner of the server to import it from only one",
		markerAmbiguous, uri, named)
}

// importedServing is the imported item that serves uri: nil when the server's own
// content does (its files, and its templates unless an import lists uri itself) or
// nothing does.
func (c *Set) importedServing(uri string) *gateway.Item {
	if c.files[uri] != nil || (c.imported.resources[uri] == nil && c.matchesTemplate(uri)) {
		return nil
	}
	return c.imported.resourceFor(uri)
}

// governingSkill is the path of the imported skill whose rule governs reading uri, a
// URI that is no file of the server's own: a file its entry lists, or a directory of
// it, and only while its own import serves uri. So a skill never puts under its rule
// what another import (or the server itself) serves, whatever its remote lists.
func (c *Set) governingSkill(uri string) (string, bool) {
	path, ok := c.imported.skillOf[uri]
	if !ok {
		d := c.dirs[uri]
		if d == nil {
			return "", false
		}
		path = d.skillPath
	}
	src, imported := c.imported.skillFrom[path]
	if !imported || c.skillByURI[src.skill.uri] != src.skill {
		return "", false // not an imported skill, or the server's own took its place
	}
	it := c.importedServing(uri)
	return path, it != nil && it.Backend.Import == src.from
}

// importedResourceEntries are the imported resources for mcp-go, less those whose URI
// the server's own content serves (its files win).
func (cp *Part) importedResourceEntries(set *Set) []server.ServerResource {
	var out []server.ServerResource
	for _, uri := range set.imported.resourceURIs {
		if set.files[uri] != nil {
			continue
		}
		out = append(out, server.ServerResource{Resource: set.imported.resources[uri].listing, Handler: cp.readImported})
	}
	return out
}

func (cp *Part) importedTemplateEntries(set *Set) []server.ServerResourceTemplate {
	out := make([]server.ServerResourceTemplate, 0, len(set.imported.templates))
	for _, t := range set.imported.templates {
		out = append(out, server.ServerResourceTemplate{Template: t.listing, Handler: cp.readImported})
	}
	return out
}

func (cp *Part) importedPromptEntries(set *Set) []server.ServerPrompt {
	var out []server.ServerPrompt
	for _, p := range set.imported.prompts {
		if set.promptByName[p.listing.Name] != nil {
			continue
		}
		out = append(out, server.ServerPrompt{Prompt: p.listing, Handler: cp.getImportedPrompt})
	}
	return out
}

// readImported is mcp-go's handler of a resources/read of an imported resource (the
// sse transport; streamable HTTP is answered by answerImported): the remote's contents,
// parsed.
func (cp *Part) readImported(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	set := cp.set.Load()
	it := set.imported.resourceFor(uri)
	if it == nil {
		return nil, fmt.Errorf("resource %s is no longer served: list the resources again: %w", uri, mcp.ErrResourceNotFound)
	}
	if kind, name := cp.set.Load().resourceItem(uri); !cp.filter.Allows(ctx, kind, name) {
		cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeRefused)
		return nil, jsonrpc.ErrNotAllowed("resource " + uri)
	}
	if err := set.imported.ambiguity(uri); err != nil {
		cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeError)
		return nil, err
	}
	if err := ofOtherEra(ctx, "resource", uri, it); err != nil {
		return nil, fmt.Errorf("%w: %w", err, mcp.ErrResourceNotFound)
	}
	raw, err := it.ReadResource(ctx, uri)
	cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeOf(err))
	if err != nil {
		return nil, err
	}
	result, err := mcp.ParseReadResourceResult(&raw)
	if err != nil {
		return nil, fmt.Errorf("%sthe remote's answer to resources/read is not a read result: %w", gateway.MarkerRemoteError, err)
	}
	return result.Contents, nil
}

// getImportedPrompt is mcp-go's handler of a prompts/get of an imported prompt (as
// readImported).
func (cp *Part) getImportedPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p := cp.set.Load().imported.promptByName[req.Params.Name]
	if p == nil {
		return nil, fmt.Errorf("prompt %q is no longer served: list the prompts again", req.Params.Name)
	}
	if !cp.filter.Allows(ctx, access.ItemPrompt, p.listing.Name) {
		cp.filter.LogRead(ctx, "prompts/get", p.listing.Name, jsonrpc.OutcomeRefused)
		return nil, jsonrpc.ErrNotAllowed("prompt " + p.listing.Name)
	}
	if err := ofOtherEra(ctx, "prompt", p.listing.Name, p.item); err != nil {
		return nil, err
	}
	args, err := promptArguments(req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	answers, err := inputAnswers(req.Params.InputResponses, req.Params.RequestState)
	if err != nil {
		return nil, err
	}
	raw, err := p.item.GetPrompt(ctx, args, answers)
	cp.filter.LogRead(ctx, "prompts/get", p.listing.Name, jsonrpc.OutcomeOf(err))
	if err != nil {
		return nil, err
	}
	result, err := mcp.ParseGetPromptResult(&raw)
	if err != nil {
		return nil, fmt.Errorf("%sthe remote's answer to prompts/get is not a prompt result: %w", gateway.MarkerRemoteError, err)
	}
	return result, nil
}

// promptsOfCallersEra leaves out of prompts the imported ones the caller of ctx is not
// listed (listedToCaller).
func (c *Set) promptsOfCallersEra(ctx context.Context, prompts []mcp.Prompt) []mcp.Prompt {
	return slices.DeleteFunc(prompts, func(listed mcp.Prompt) bool {
		p := c.imported.promptByName[listed.Name]
		return p != nil && c.promptByName[listed.Name] == nil && !listedToCaller(ctx, p.item)
	})
}

// resourcesOfCallersEra leaves out of resources the imported ones the caller of ctx is
// not listed (listedToCaller).
func (c *Set) resourcesOfCallersEra(ctx context.Context, resources []mcp.Resource) []mcp.Resource {
	return slices.DeleteFunc(resources, func(listed mcp.Resource) bool {
		it := c.importedServing(listed.URI)
		return it != nil && !listedToCaller(ctx, it)
	})
}

// templatesOfCallersEra leaves out of templates the imported ones the caller of ctx is
// not listed (listedToCaller).
func (c *Set) templatesOfCallersEra(ctx context.Context, templates []mcp.ResourceTemplate) []mcp.ResourceTemplate {
	otherEra := map[string]bool{}
	for _, t := range c.imported.templates {
		raw := t.listing.URITemplate.Raw()
		otherEra[raw] = otherEra[raw] || !listedToCaller(ctx, t.item)
	}
	return slices.DeleteFunc(templates, func(listed mcp.ResourceTemplate) bool { return otherEra[listed.URITemplate.Raw()] })
}

// listedToCaller says whether the caller of ctx is listed it: its remote lists it in
// the caller's protocol era, or does not serve that era.
func listedToCaller(ctx context.Context, it *gateway.Item) bool {
	return it.Backend.ListedTo(gateway.CallerEra(ctx))
}

// ofOtherEra is nil when it, the imported item kind key, is listed to the caller of
// ctx; otherwise the error that says its remote lists it only to callers of the other
// protocol era.
func ofOtherEra(ctx context.Context, kind, key string, it *gateway.Item) error {
	if listedToCaller(ctx, it) {
		return nil
	}
	era := gateway.CallerEra(ctx)
	return fmt.Errorf("%s %q is not served to clients of protocol %s: its remote (import %s) lists it only to clients of another",
		kind, key, era, it.Backend.Import)
}

// inputAnswers are the answers of a prompts/get retry that mcp-go parsed.
func inputAnswers(responses mcp.InputResponses, state string) (mcpclient.InputAnswers, error) {
	answers := mcpclient.InputAnswers{RequestState: state}
	if len(responses) == 0 {
		return answers, nil
	}
	raw, err := json.Marshal(responses)
	if err != nil {
		return answers, fmt.Errorf("encode the input responses: %w", err)
	}
	answers.InputResponses = raw
	return answers, nil
}

// withProtocolInfo is ctx with the protocol information of a request of 2026-07-28
// whose _meta is meta, as mcp-go gives its handlers: the requests this package answers
// before mcp-go are forwarded in the caller's era, with its capabilities.
func withProtocolInfo(ctx context.Context, meta map[string]json.RawMessage) context.Context {
	info := &server.RequestProtocolInfo{Modern: true}
	_ = json.Unmarshal(meta[mcp.MetaKeyProtocolVersion], &info.ProtocolVersion)
	var caps mcp.ClientCapabilities
	if json.Unmarshal(meta[mcp.MetaKeyClientCapabilities], &caps) == nil {
		info.ClientCapabilities = &caps
	}
	var client mcp.Implementation
	if json.Unmarshal(meta[mcp.MetaKeyClientInfo], &client) == nil {
		info.ClientInfo = &client
	}
	_ = json.Unmarshal(meta[mcp.MetaKeyLogLevel], &info.LogLevel)
	return server.WithRequestProtocolInfo(ctx, info)
}

func promptArguments(args map[string]string) (json.RawMessage, error) {
	if args == nil {
		return nil, nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode the prompt arguments: %w", err)
	}
	return raw, nil
}

// answerImported answers, on streamable HTTP, a resources/read or prompts/get of an
// imported item with the remote's result as sent, and reports whether it did.
func (cp *Part) answerImported(w http.ResponseWriter, r *http.Request, req *contentRequest) bool {
	set := cp.set.Load()
	if set.imported.empty() {
		return false
	}
	ctx := r.Context()
	if req.modern {
		ctx = withProtocolInfo(ctx, req.Params.Meta)
	}
	var raw json.RawMessage
	var err error
	switch req.Method {
	case string(mcp.MethodResourcesRead):
		uri := req.Params.URI
		it := set.importedServing(uri)
		if it == nil {
			return false // the server's own, or nothing
		}
		if kind, name := cp.set.Load().resourceItem(uri); !cp.filter.Allows(ctx, kind, name) {
			cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeRefused)
			jsonrpc.WriteAnswer(w, req.ID, jsonrpc.Refused("resource "+uri))
			return true
		}
		if ambiguous := set.imported.ambiguity(uri); ambiguous != nil {
			cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeError)
			jsonrpc.WriteAnswer(w, req.ID, jsonrpc.InvalidParams(ambiguous.Error()))
			return true
		}
		if otherEra := ofOtherEra(ctx, "resource", uri, it); otherEra != nil {
			jsonrpc.WriteAnswer(w, req.ID, jsonrpc.InvalidParams(otherEra.Error()))
			return true
		}
		raw, err = it.ReadResource(ctx, uri)
		cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeOf(err))
	case string(mcp.MethodPromptsGet):
		p := set.imported.promptByName[req.Params.Name]
		if p == nil || set.promptByName[req.Params.Name] != nil {
			return false
		}
		if !cp.filter.Allows(ctx, access.ItemPrompt, p.listing.Name) {
			cp.filter.LogRead(ctx, "prompts/get", p.listing.Name, jsonrpc.OutcomeRefused)
			jsonrpc.WriteAnswer(w, req.ID, jsonrpc.Refused("prompt "+p.listing.Name))
			return true
		}
		if otherEra := ofOtherEra(ctx, "prompt", p.listing.Name, p.item); otherEra != nil {
			jsonrpc.WriteAnswer(w, req.ID, jsonrpc.InvalidParams(otherEra.Error()))
			return true
		}
		args, argsErr := promptArguments(req.Params.Arguments)
		if argsErr != nil {
			jsonrpc.WriteAnswer(w, req.ID, jsonrpc.InvalidParams(argsErr.Error()))
			return true
		}
		raw, err = p.item.GetPrompt(ctx, args, mcpclient.InputAnswers{InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState})
		cp.filter.LogRead(ctx, "prompts/get", p.listing.Name, jsonrpc.OutcomeOf(err))
	default:
		return false
	}
	if err != nil {
		jsonrpc.WriteAnswer(w, req.ID, jsonrpc.ForwardFailure(err))
		return true
	}
	if req.modern {
		raw = withModernMembers(raw, req.Method == string(mcp.MethodResourcesRead))
	}
	gateway.WriteResult(w, req.ID, raw)
	return true
}

// withModernMembers adds to raw, a result the remote gave the gateway's session of an
// older protocol, the members protocol 2026-07-28 requires of it: resultType and, for
// a resource read, the caching hints (SEP-2549) the gateway's own reads carry. The
// rest stays as the remote sent it.
func withModernMembers(raw json.RawMessage, read bool) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) < 2 || trimmed[0] != '{' || bytes.Contains(trimmed, []byte(`"resultType"`)) {
		return raw
	}
	members := `"resultType":"complete"`
	if read {
		members += fmt.Sprintf(`,"ttlMs":%d,"cacheScope":%q`, cacheTTLMs, cacheScope)
	}
	rest := bytes.TrimSpace(trimmed[1:])
	out := make([]byte, 0, len(trimmed)+len(members)+2)
	out = append(append(out, '{'), members...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// importedListWriter rewrites the answer to body when it lists prompts, resources or
// resource templates and imported ones are served; nil otherwise.
func (cp *Part) importedListWriter(w http.ResponseWriter, body []byte) *gateway.AnswerRewriter {
	defs := &cp.set.Load().imported.defs
	if defs.Empty() || !gateway.MayListContent(body) {
		return nil
	}
	switch admission.ParseHead(body).Method {
	case string(mcp.MethodPromptsList), string(mcp.MethodResourcesList), string(mcp.MethodResourcesTemplatesList):
		return gateway.NewContentListWriter(w, defs)
	}
	return nil
}

// addSkill serves an imported skill's entry as its remote listed it (URIs as served).
// Its rule governs only the files in its own directory (render leaves any other out of
// the entry); a file two skills' directories hold is the deepest one's.
func (set *importedSet) addSkill(it *adapterconfig.ImportedItem) error {
	var entry struct {
		URI       string `json:"uri"`
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(it.Definition, &entry); err != nil {
		return fmt.Errorf("imported skill %q: %w", adapterconfig.ClipName(it.Key), err)
	}
	path := strings.TrimSuffix(strings.TrimPrefix(it.Key, adapterconfig.SkillURIScheme), "/"+adapterconfig.SkillManifestFile)
	skill := &servedSkill{path: path, uri: it.Key, entry: compactJSON(it.Definition)}
	set.skills = append(set.skills, skill)
	set.skillFrom[path] = importedSkill{skill: skill, from: it.Remote.Import}
	dir := adapterconfig.SkillURIScheme + path + "/"
	for _, r := range entry.Resources {
		if strings.HasPrefix(r.URI, dir) {
			set.claim(r.URI, path)
		}
	}
	set.claim(it.Key, path)
	set.skillFiles.AddSkill(it.Key, it.Definition)
	return nil
}

// claim puts uri, a file in the directory of the skill at path, under that skill,
// unless a skill in a deeper directory holds it.
func (set *importedSet) claim(uri, path string) {
	if held, ok := set.skillOf[uri]; ok && len(held) >= len(path) {
		return
	}
	set.skillOf[uri] = path
}
