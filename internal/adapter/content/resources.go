package content

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
)

// SkillsExtension is the MCP Skills extension's identifier in the capabilities.
const SkillsExtension = "io.modelcontextprotocol/skills"

// contentOptions are the mcp-go options for what set serves besides tools. A server
// that serves none of it keeps the capabilities it always had.
func (cp *Part) contentOptions(set *Set) []server.ServerOption {
	var opts []server.ServerOption
	if set.servesResources() || cp.servesSkillMethods() {
		// subscribe: the gateway relays subscriptions to imports' remotes that offer them.
		opts = append(opts, server.WithResourceCapabilities(cp.subscriptions.Relays(), true))
	}
	if len(set.prompts) > 0 || len(set.imported.prompts) > 0 {
		opts = append(opts, server.WithPromptCapabilities(true))
	}
	if exts := cp.Extensions(); len(exts) > 0 {
		opts = append(opts, server.WithExtensions(exts))
	}
	return opts
}

// Extensions are the extensions the content served advertises (mcp-go's
// WithExtensions takes all of a server's at once); nil for none.
func (cp *Part) Extensions() map[string]any {
	if !cp.servesSkillMethods() {
		return nil
	}
	return map[string]any{SkillsExtension: map[string]any{"directoryRead": true}}
}

// servesSkillMethods says whether skills/list, skills/get and resources/directory/read
// are served: only on streamable HTTP, where the adapter reads each request before
// mcp-go (which does not route these methods); on sse the answer would have to go
// through mcp-go's session stream. A config with skills from images serves them even when
// it left every one out: the operator's verification then lists no skill, and says which
// are missing, rather than finding no skills/list at all.
func (cp *Part) servesSkillMethods() bool {
	return cp.cfg.Transport != adapterconfig.TransportSSE && (len(cp.set.Load().skills) > 0 || len(cp.cfg.ImageSkills) > 0)
}

// registerFiles gives mcp-go the skill files and resources of set; when m already
// serves some, mcp-go sends notifications/resources/list_changed.
func (cp *Part) registerFiles(m *server.MCPServer, set *Set) {
	resources := make([]server.ServerResource, 0, len(set.fileURIs))
	for _, uri := range set.fileURIs {
		resources = append(resources, server.ServerResource{Resource: set.files[uri].listing, Handler: cp.readFile})
	}
	resources = append(resources, cp.importedResourceEntries(set)...)
	// Setting an empty list on a server that never served any would declare the
	// resources capability: a tools-only server keeps its capabilities.
	if len(resources) > 0 || len(m.ListResources()) > 0 {
		m.SetResources(resources...)
	}
}

// registerTemplates gives mcp-go the resource templates of set, as registerFiles.
func (cp *Part) registerTemplates(m *server.MCPServer, set *Set) {
	templates := make([]server.ServerResourceTemplate, 0, len(set.templates))
	for _, t := range set.templates {
		templates = append(templates, server.ServerResourceTemplate{Template: mcpResourceTemplate(t), Handler: cp.readTemplate(t.URITemplate)})
	}
	templates = append(templates, cp.importedTemplateEntries(set)...)
	if len(templates) > 0 || cp.servedTemplates {
		m.SetResourceTemplates(templates...)
		cp.servedTemplates = len(templates) > 0
	}
}

// registerPrompts gives mcp-go the prompts of set; when m already serves some, mcp-go
// sends notifications/prompts/list_changed.
func (cp *Part) registerPrompts(m *server.MCPServer, set *Set) {
	prompts := make([]server.ServerPrompt, 0, len(set.prompts))
	for _, p := range set.prompts {
		prompts = append(prompts, server.ServerPrompt{Prompt: mcpPrompt(p), Handler: cp.getPrompt})
	}
	prompts = append(prompts, cp.importedPromptEntries(set)...)
	if len(prompts) > 0 || len(m.ListPrompts()) > 0 {
		m.SetPrompts(prompts...)
	}
}

// filesListing is everything a resources/list or skills/list client sees of set (the
// skills' digests included), to tell whether a reload changed it.
func filesListing(set *Set) []byte {
	parts := []any{}
	for _, uri := range set.fileURIs {
		parts = append(parts, set.files[uri].listing)
	}
	for _, skill := range set.skills {
		parts = append(parts, skill.entry)
	}
	for _, uri := range set.imported.resourceURIs {
		parts = append(parts, set.imported.resources[uri].listing)
	}
	b, _ := json.Marshal(parts)
	return b
}

// templatesListing is what a resources/templates/list client sees of set.
func templatesListing(set *Set) []byte {
	return append(listingJSON(set.templates, mcpResourceTemplate),
		listingJSON(set.imported.templates, func(t *importedTemplate) mcp.ResourceTemplate { return t.listing })...)
}

// promptsListing is what a prompts/list client sees of set.
func promptsListing(set *Set) []byte {
	return append(listingJSON(set.prompts, mcpPrompt), listingJSON(set.imported.prompts, func(p *importedPrompt) mcp.Prompt { return p.listing })...)
}

// listingJSON is the JSON of items in their MCP shape, to compare one listing with the
// next.
func listingJSON[T, U any](items []T, shape func(T) U) []byte {
	parts := make([]U, 0, len(items))
	for _, it := range items {
		parts = append(parts, shape(it))
	}
	b, _ := json.Marshal(parts)
	return b
}

func mcpResourceTemplate(t *servedTemplate) mcp.ResourceTemplate {
	out := mcp.NewResourceTemplate(t.URITemplate, t.Name,
		mcp.WithTemplateDescription(t.Description), mcp.WithTemplateMIMEType(t.MimeType))
	out.Title = t.Title
	out.Annotations = mcpAnnotations(t.Annotations)
	return out
}

func mcpPrompt(p *servedPrompt) mcp.Prompt { return listing.Prompt(&p.Prompt) }

// contentHooks filter every resources/list, resources/templates/list and prompts/list
// answer down to what its caller may read or get.
func (cp *Part) contentHooks(hooks *server.Hooks) {
	hooks.AddAfterListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, result *mcp.ListResourcesResult) {
		result.Resources = admission.Visible(ctx, cp.filter, string(mcp.MethodResourcesList), result.Resources, func(r mcp.Resource) (access.ItemKind, string) { return cp.set.Load().resourceItem(r.URI) })
		result.Resources = cp.set.Load().resourcesOfCallersEra(ctx, result.Resources)
	})
	hooks.AddAfterListResourceTemplates(func(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, result *mcp.ListResourceTemplatesResult) {
		result.ResourceTemplates = admission.Visible(ctx, cp.filter, string(mcp.MethodResourcesTemplatesList), result.ResourceTemplates, func(t mcp.ResourceTemplate) (access.ItemKind, string) {
			return access.ItemResource, t.URITemplate.Raw()
		})
		result.ResourceTemplates = cp.set.Load().templatesOfCallersEra(ctx, result.ResourceTemplates)
	})
	hooks.AddAfterListPrompts(func(ctx context.Context, _ any, _ *mcp.ListPromptsRequest, result *mcp.ListPromptsResult) {
		result.Prompts = admission.Visible(ctx, cp.filter, string(mcp.MethodPromptsList), result.Prompts, func(p mcp.Prompt) (access.ItemKind, string) { return access.ItemPrompt, p.Name })
		result.Prompts = cp.set.Load().promptsOfCallersEra(ctx, result.Prompts)
	})
}

// readFile serves resources/read of a skill file or static resource.
func (cp *Part) readFile(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	f := cp.set.Load().files[uri]
	if f == nil {
		// Listed just before a reload removed it.
		return nil, fmt.Errorf("resource %s is no longer served: list the resources again: %w", uri, mcp.ErrResourceNotFound)
	}
	if kind, name := cp.set.Load().resourceItem(uri); !cp.filter.Allows(ctx, kind, name) {
		cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeRefused)
		return nil, jsonrpc.ErrNotAllowed("resource " + uri)
	}
	cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeOK)
	return []mcp.ResourceContents{fileContents(uri, f)}, nil
}

func fileContents(uri string, f *servedFile) mcp.ResourceContents {
	if f.text {
		return mcp.TextResourceContents{URI: uri, MIMEType: f.listing.MIMEType, Text: f.body}
	}
	return mcp.BlobResourceContents{URI: uri, MIMEType: f.listing.MIMEType, Blob: f.body}
}

// readTemplate serves resources/read of a URI that matched a resource template.
func (cp *Part) readTemplate(uriTemplate string) server.ResourceTemplateHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		t := cp.set.Load().templateOf(uriTemplate)
		uri := req.Params.URI
		if t == nil {
			return nil, fmt.Errorf("resource template %s is no longer served: %w", uriTemplate, mcp.ErrResourceNotFound)
		}
		if !cp.filter.Allows(ctx, access.ItemResource, uri) {
			cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeRefused)
			return nil, jsonrpc.ErrNotAllowed("resource " + uri)
		}
		text, err := cp.renderTemplateResource(ctx, t, templateArguments(req.Params.Arguments))
		if err != nil {
			cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeError)
			return nil, err
		}
		cp.filter.LogRead(ctx, "resources/read", uri, jsonrpc.OutcomeOK)
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: t.MimeType, Text: text}}, nil
	}
}

// templateOf is the template of set written uriTemplate; nil if none.
func (set *Set) templateOf(uriTemplate string) *servedTemplate {
	for _, t := range set.templates {
		if t.URITemplate == uriTemplate {
			return t
		}
	}
	return nil
}

// templateArguments turns the URI's variables into strings (a list variable joins
// with ",", as it was written in the URI).
func templateArguments(vars map[string]any) map[string]string {
	out := make(map[string]string, len(vars))
	for k, v := range vars {
		switch v := v.(type) {
		case string:
			out[k] = v
		case []string:
			out[k] = strings.Join(v, ",")
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// renderTemplateResource runs the template's backend over the arguments.
func (cp *Part) renderTemplateResource(ctx context.Context, t *servedTemplate, args map[string]string) (string, error) {
	if t.template != nil {
		return executeTemplate(t.template, args)
	}
	body, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("%sencode the arguments: %w", jsonrpc.MarkerHTTPFailed, err)
	}
	result := cp.postToBackend(ctx, t.HTTP, body)
	if result.IsError {
		return "", errors.New(jsonrpc.ResultText(result))
	}
	return jsonrpc.ResultText(result), nil
}

func executeTemplate(tmpl *template.Template, data any) (string, error) {
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		return "", fmt.Errorf("%s%w", jsonrpc.MarkerTemplateFailed, err)
	}
	return out.String(), nil
}

// getPrompt serves prompts/get.
func (cp *Part) getPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p := cp.set.Load().promptByName[req.Params.Name]
	if p == nil {
		return nil, fmt.Errorf("prompt %q is no longer served: list the prompts again", req.Params.Name)
	}
	if !cp.filter.Allows(ctx, access.ItemPrompt, p.Name) {
		cp.filter.LogRead(ctx, "prompts/get", p.Name, jsonrpc.OutcomeRefused)
		return nil, jsonrpc.ErrNotAllowed("prompt " + p.Name)
	}
	if missing := missingArgument(p, req.Params.Arguments); missing != "" {
		return nil, fmt.Errorf("%w: prompt %q needs the argument %q", mcp.ErrInvalidParams, p.Name, missing)
	}
	result, err := cp.renderPrompt(ctx, p, req.Params.Arguments)
	outcome := jsonrpc.OutcomeOK
	if err != nil {
		outcome = jsonrpc.OutcomeError
	}
	cp.filter.LogRead(ctx, "prompts/get", p.Name, outcome)
	return result, err
}

// missingArgument names the first required argument args lacks.
func missingArgument(p *servedPrompt, args map[string]string) string {
	for _, a := range p.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			return a.Name
		}
	}
	return ""
}

// renderPrompt renders the prompt's messages over the arguments, or asks its backend.
func (cp *Part) renderPrompt(ctx context.Context, p *servedPrompt, args map[string]string) (*mcp.GetPromptResult, error) {
	if args == nil {
		args = map[string]string{}
	}
	if p.HTTP != nil {
		return cp.promptFromBackend(ctx, p, args)
	}
	result := &mcp.GetPromptResult{Description: p.Description, Messages: make([]mcp.PromptMessage, 0, len(p.Messages))}
	for i, m := range p.Messages {
		content, err := p.renderContent(i, m.Content, args)
		if err != nil {
			return nil, fmt.Errorf("prompt %q, message %d: %w", p.Name, i, err)
		}
		result.Messages = append(result.Messages, mcp.PromptMessage{Role: mcp.Role(m.Role), Content: content})
	}
	return result, nil
}

func (p *servedPrompt) renderContent(i int, c adapterconfig.PromptContent, args map[string]string) (mcp.Content, error) {
	key := fmt.Sprint(i)
	switch c.Type {
	case adapterconfig.ContentImage:
		return mcp.NewImageContent(c.Data, c.MimeType), nil
	case adapterconfig.ContentAudio:
		return mcp.NewAudioContent(c.Data, c.MimeType), nil
	case adapterconfig.ContentResource:
		uri, err := executeTemplate(p.texts[key+".uri"], args)
		if err != nil {
			return nil, err
		}
		if c.Resource.Blob != nil {
			return mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: uri, MIMEType: c.Resource.MimeType, Blob: *c.Resource.Blob}), nil
		}
		text, err := executeTemplate(p.texts[key+".text"], args)
		if err != nil {
			return nil, err
		}
		return mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uri, MIMEType: c.Resource.MimeType, Text: text}), nil
	default:
		text, err := executeTemplate(p.texts[key], args)
		if err != nil {
			return nil, err
		}
		return mcp.NewTextContent(text), nil
	}
}

// promptFromBackend POSTs the arguments and reads the answer as a prompts/get result.
func (cp *Part) promptFromBackend(ctx context.Context, p *servedPrompt, args map[string]string) (*mcp.GetPromptResult, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%sencode the arguments: %w", jsonrpc.MarkerHTTPFailed, err)
	}
	answer := cp.postToBackend(ctx, p.HTTP, body)
	if answer.IsError {
		return nil, errors.New(jsonrpc.ResultText(answer))
	}
	result, err := mcp.ParseGetPromptResult(rawMessage(jsonrpc.ResultText(answer)))
	if err != nil {
		return nil, fmt.Errorf("%sthe answer is not a prompts/get result (messages): %w", jsonrpc.MarkerHTTPFailed, err)
	}
	return result, nil
}

func rawMessage(s string) *json.RawMessage {
	raw := json.RawMessage(s)
	return &raw
}

// resourceItem is what governs reading uri in set: the path of the skill whose file it is (the
// server's own, or an imported one its import serves), or the URI.
func (set *Set) resourceItem(uri string) (access.ItemKind, string) {
	if f := set.files[uri]; f != nil {
		if f.skillPath != "" {
			return access.ItemSkill, f.skillPath
		}
		return access.ItemResource, uri
	}
	if path, ok := set.governingSkill(uri); ok {
		return access.ItemSkill, path
	}
	return access.ItemResource, uri
}
