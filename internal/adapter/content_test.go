package adapter

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/content"
	"github.com/cantus-dev/cantus-operator/internal/adapter/jsonrpc"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// contentDir is a ContentDir under construction: store writes bytes under their digest.
type contentDir struct {
	t   *testing.T
	dir string
}

func newContentDir(t *testing.T) *contentDir { return &contentDir{t: t, dir: t.TempDir()} }

// store writes data and returns its digest.
func (c *contentDir) store(data []byte) string {
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(c.dir, hex.EncodeToString(sum[:])), data, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return digest
}

// skill stores files (path → content) and returns the skill at skillPath.
func (c *contentDir) skill(skillPath, description string, files map[string]string) adapterconfig.AgentSkill {
	name := skillPath[strings.LastIndex(skillPath, "/")+1:]
	fm, _ := json.Marshal(map[string]any{"name": name, "description": description, "license": "Apache-2.0"})
	s := adapterconfig.AgentSkill{Path: skillPath, Frontmatter: fm}
	for _, p := range slices.Sorted(mapKeys(files)) {
		s.Files = append(s.Files, adapterconfig.SkillFile{Path: p, Digest: c.store([]byte(files[p])), Size: int64(len(files[p]))})
	}
	return s
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func skillMD(name, description string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\nlicense: Apache-2.0\n---\n\n# " + name + "\n"
}

// contentConfig serves two skills (one under a prefix, with nested files and a binary
// one), a text and a binary resource, a resource template and three prompts.
func contentConfig(t *testing.T, dir *contentDir) *adapterconfig.Config {
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a_tool", objectSchema, "A"))
	cfg.ContentDir = dir.dir
	cfg.AgentSkills = []adapterconfig.AgentSkill{
		dir.skill("git-workflow", "Branching rules", map[string]string{"SKILL.md": skillMD("git-workflow", "Branching rules")}),
		dir.skill("acme/billing/refunds", "Refund policy", map[string]string{
			"SKILL.md":                 skillMD("refunds", "Refund policy"),
			"templates/email.md":       "Dear customer",
			"templates/regional/eu.md": "EU rules",
			"assets/logo.png":          string(pngBytes),
		}),
	}
	text := "This is the content of the static text resource."
	cfg.Resources = []adapterconfig.Resource{
		{URI: "test://static-text", Name: "static-text", MimeType: "text/plain", Text: &text},
		{URI: "test://static-binary", Name: "static-binary", MimeType: "image/png", Content: &adapterconfig.ContentRef{Digest: dir.store(pngBytes), Size: int64(len(pngBytes)), Binary: true}},
	}
	cfg.ResourceTemplates = []adapterconfig.ResourceTemplate{{
		URITemplate: "test://template/{id}/data", Name: "data", MimeType: "application/json",
		Template: &adapterconfig.TemplateBackend{Text: `{"id":"{{.id}}"}`},
	}}
	embedded := "Resource {{.resourceUri}}"
	cfg.Prompts = []adapterconfig.Prompt{
		{Name: "test_simple_prompt", Description: "simple", Messages: []adapterconfig.PromptMessage{{Role: "user", Content: adapterconfig.PromptContent{Type: "text", Text: "This is a simple prompt for testing."}}}},
		{Name: "test_prompt_with_arguments", Description: "args", Arguments: []adapterconfig.PromptArgument{{Name: "arg1", Required: true}, {Name: "arg2", Required: true}},
			Messages: []adapterconfig.PromptMessage{{Role: "user", Content: adapterconfig.PromptContent{Type: "text", Text: "Prompt with arguments: arg1='{{.arg1}}', arg2='{{.arg2}}'"}}}},
		{Name: "test_prompt_with_embedded_resource", Description: "embedded", Arguments: []adapterconfig.PromptArgument{{Name: "resourceUri", Required: true}},
			Messages: []adapterconfig.PromptMessage{
				{Role: "user", Content: adapterconfig.PromptContent{Type: "resource", Resource: &adapterconfig.PromptResource{URI: "{{.resourceUri}}", MimeType: "text/plain", Text: &embedded}}},
				{Role: "user", Content: adapterconfig.PromptContent{Type: "image", Data: base64.StdEncoding.EncodeToString(pngBytes), MimeType: "image/png"}},
			}},
	}
	return cfg
}

// rpc posts one JSON-RPC request and decodes its answer.
func rpc(t *testing.T, baseURL string, headers map[string]string, method string, params any) (json.RawMessage, *jsonrpc.Error) {
	t.Helper()
	p, _ := json.Marshal(params)
	reply := postRPC(t, baseURL+adapterconfig.PathMCP, withProtocol(headers), fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, p))
	var answer struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(reply.body, &answer); err != nil {
		t.Fatalf("%s: answer %d %q is not JSON-RPC: %v", method, reply.status, reply.body, err)
	}
	if string(answer.ID) != "7" {
		t.Fatalf("%s: answer id %s, want 7", method, answer.ID)
	}
	return answer.Result, answer.Error
}

func withProtocol(headers map[string]string) map[string]string {
	out := map[string]string{"Mcp-Protocol-Version": protocol20251125}
	for k, v := range headers {
		out[k] = v
	}
	return out
}

type listedSkills struct {
	ResultType string               `json:"resultType"`
	Skills     []content.SkillEntry `json:"skills"`
	NextCursor string               `json:"nextCursor"`
	TTLMs      *int64               `json:"ttlMs"`
	CacheScope string               `json:"cacheScope"`
}

func listSkillPages(t *testing.T, baseURL string, headers map[string]string) ([]content.SkillEntry, int) {
	t.Helper()
	var all []content.SkillEntry
	cursor, pages := "", 0
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, rpcErr := rpc(t, baseURL, headers, "skills/list", params)
		if rpcErr != nil {
			t.Fatalf("skills/list: %+v", rpcErr)
		}
		var page listedSkills
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		if page.ResultType != "complete" || page.TTLMs == nil || page.CacheScope == "" {
			t.Fatalf("skills/list page lacks resultType, ttlMs or cacheScope: %s", raw)
		}
		all, pages = append(all, page.Skills...), pages+1
		if page.NextCursor == "" {
			return all, pages
		}
		cursor = page.NextCursor
	}
}

// readBytes reads uri with resources/read and returns the bytes it carries.
func readBytes(t *testing.T, c *client.Client, uri string) ([]byte, string) {
	t.Helper()
	res, err := c.ReadResource(testkit.Context(t, testTimeout), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		t.Fatalf("resources/read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("resources/read %s: %d contents", uri, len(res.Contents))
	}
	switch c := res.Contents[0].(type) {
	case mcp.TextResourceContents:
		return []byte(c.Text), c.MIMEType
	case mcp.BlobResourceContents:
		data, err := base64.StdEncoding.DecodeString(c.Blob)
		if err != nil {
			t.Fatal(err)
		}
		return data, c.MIMEType
	}
	t.Fatalf("resources/read %s: contents of type %T", uri, res.Contents[0])
	return nil, ""
}

// Every file a skills/list entry names reads back as bytes whose sha256 and size are
// the entry's; SKILL.md is listed by resources/list with its frontmatter's name and
// description and text/markdown; skills/get answers the same entry.
func TestSkills_EntriesDigestWhatResourcesReadReturns(t *testing.T) {
	srv := serve(t, contentConfig(t, newContentDir(t)))
	c := connect(t, srv.baseURL, protocol20251125, nil)

	skills, _ := listSkillPages(t, srv.baseURL, nil)
	if got := len(skills); got != 2 {
		t.Fatalf("skills/list lists %d skills, want 2", got)
	}
	files := 0
	for _, skill := range skills {
		for _, r := range skill.Resources {
			data, _ := readBytes(t, c, r.URI)
			sum := sha256.Sum256(data)
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != r.Digest || int64(len(data)) != r.Size {
				t.Errorf("%s: read %d bytes with digest %s, the entry says %d and %s", r.URI, len(data), got, r.Size, r.Digest)
			}
			files++
		}
		raw, rpcErr := rpc(t, srv.baseURL, nil, "skills/get", map[string]string{"uri": skill.URI})
		if rpcErr != nil {
			t.Fatalf("skills/get %s: %+v", skill.URI, rpcErr)
		}
		var got struct {
			Skill      content.SkillEntry `json:"skill"`
			NextCursor *string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Skill.URI != skill.URI || len(got.Skill.Resources) != len(skill.Resources) || got.NextCursor != nil {
			t.Errorf("skills/get %s = %s", skill.URI, raw)
		}
	}
	if files != 5 {
		t.Errorf("the entries list %d files, want 5", files)
	}
	list, err := c.ListResources(testkit.Context(t, testTimeout), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Resources, func(r mcp.Resource) bool { return r.URI == "skill://acme/billing/refunds/SKILL.md" })
	if i < 0 {
		t.Fatalf("resources/list lacks the SKILL.md: %v", list.Resources)
	}
	if r := list.Resources[i]; r.Name != "refunds" || r.Description != "Refund policy" || r.MIMEType != "text/markdown" {
		t.Errorf("SKILL.md listed as %+v", r)
	}
	if _, mimeType := readBytes(t, c, "skill://acme/billing/refunds/assets/logo.png"); mimeType != "image/png" {
		t.Errorf("logo.png served as %s", mimeType)
	}
}

// resources/directory/read lists a directory's direct children, subdirectories as
// inode/directory; a file, an unknown URI, an unknown skill and an unknown resource are
// -32602.
func TestSkills_DirectoriesAndInvalidParams(t *testing.T) {
	srv := serve(t, contentConfig(t, newContentDir(t)))
	raw, rpcErr := rpc(t, srv.baseURL, nil, "resources/directory/read", map[string]string{"uri": "skill://acme/billing/refunds/templates"})
	if rpcErr != nil {
		t.Fatalf("directory read: %+v", rpcErr)
	}
	var dir struct {
		ResultType string         `json:"resultType"`
		Resources  []mcp.Resource `json:"resources"`
	}
	if err := json.Unmarshal(raw, &dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range dir.Resources {
		got = append(got, r.URI+" "+r.MIMEType)
	}
	want := []string{"skill://acme/billing/refunds/templates/email.md text/markdown", "skill://acme/billing/refunds/templates/regional inode/directory"}
	if dir.ResultType != "complete" || !slices.Equal(got, want) {
		t.Errorf("directory read = %s %v, want %v", dir.ResultType, got, want)
	}

	for _, tc := range []struct{ method, param, value, want string }{
		{"resources/directory/read", "uri", "skill://acme/billing/refunds/SKILL.md", "not a directory"},
		{"resources/directory/read", "uri", "skill://nowhere", "not a directory"},
		{"skills/get", "uri", "skill://nowhere/SKILL.md", "no skill is served"},
		{"resources/read", "uri", "test://nonexistent", "no resource is served"},
	} {
		_, rpcErr := rpc(t, srv.baseURL, nil, tc.method, map[string]string{tc.param: tc.value})
		if rpcErr == nil || rpcErr.Code != mcp.INVALID_PARAMS || !strings.Contains(rpcErr.Message, tc.want) {
			t.Errorf("%s %s: error %+v, want -32602 with %q", tc.method, tc.value, rpcErr, tc.want)
		}
	}
	_, rpcErr = rpc(t, srv.baseURL, nil, "prompts/get", map[string]any{"name": "test_prompt_with_arguments", "arguments": map[string]string{"arg1": "x"}})
	if rpcErr == nil || rpcErr.Code != mcp.INVALID_PARAMS || !strings.Contains(rpcErr.Message, `"arg2"`) {
		t.Errorf("prompts/get without arg2: %+v, want -32602 naming arg2", rpcErr)
	}
}

// Resources, templates and prompts render as configured, image and embedded resource
// included.
func TestResourcesAndPromptsServeTheirContent(t *testing.T) {
	srv := serve(t, contentConfig(t, newContentDir(t)))
	c := connect(t, srv.baseURL, protocol20251125, nil)
	if data, mimeType := readBytes(t, c, "test://static-binary"); string(data) != string(pngBytes) || mimeType != "image/png" {
		t.Errorf("static-binary = %q %s", data, mimeType)
	}
	if data, _ := readBytes(t, c, "test://template/123/data"); string(data) != `{"id":"123"}` {
		t.Errorf("template read = %s", data)
	}
	res, err := c.GetPrompt(testkit.Context(t, testTimeout), mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "test_prompt_with_embedded_resource", Arguments: map[string]string{"resourceUri": "test://example-resource"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.Messages)
	want := `[{"role":"user","content":{"type":"resource","resource":{"uri":"test://example-resource","mimeType":"text/plain","text":"Resource test://example-resource"}}},` +
		`{"role":"user","content":{"type":"image","data":"` + base64.StdEncoding.EncodeToString(pngBytes) + `","mimeType":"image/png"}}]`
	if !testkit.JSONEqual(t, got, []byte(want)) {
		t.Errorf("messages = %s\nwant %s", got, want)
	}
}

// skills/list and resources/directory/read page without splitting or repeating an
// entry.
func TestSkills_Pagination(t *testing.T) {
	dir := newContentDir(t)
	cfg := configWith(adapterconfig.TransportStreamableHTTP, true)
	cfg.ContentDir = dir.dir
	files := map[string]string{"SKILL.md": skillMD("big", "many files")}
	for i := range 250 {
		files[fmt.Sprintf("refs/f%03d.md", i)] = fmt.Sprint(i)
	}
	cfg.AgentSkills = append(cfg.AgentSkills, dir.skill("big", "many files", files))
	for i := range 230 {
		name := fmt.Sprintf("s%03d", i)
		cfg.AgentSkills = append(cfg.AgentSkills, dir.skill(name, "d", map[string]string{"SKILL.md": skillMD(name, "d")}))
	}
	srv := serve(t, cfg)
	skills, pages := listSkillPages(t, srv.baseURL, nil)
	seen := map[string]bool{}
	for _, s := range skills {
		if seen[s.URI] {
			t.Errorf("%s listed twice", s.URI)
		}
		seen[s.URI] = true
	}
	if len(seen) != 231 || pages != 3 {
		t.Errorf("%d skills over %d pages, want 231 over 3", len(seen), pages)
	}
	var children []string
	cursor := ""
	for pages = 0; ; pages++ {
		params := map[string]string{"uri": "skill://big/refs"}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, rpcErr := rpc(t, srv.baseURL, nil, "resources/directory/read", params)
		if rpcErr != nil {
			t.Fatal(rpcErr)
		}
		var page struct {
			Resources  []mcp.Resource `json:"resources"`
			NextCursor string         `json:"nextCursor"`
		}
		_ = json.Unmarshal(raw, &page)
		for _, r := range page.Resources {
			children = append(children, r.URI)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(children) != 250 || !slices.IsSorted(children) || len(slices.Compact(slices.Clone(children))) != 250 || pages < 2 {
		t.Errorf("directory pages gave %d children", len(children))
	}
}

// A caller lists, reads and gets only the skills, resources and prompts its rules
// allow; a refused read says it is not allowed, with -32602, without naming rules.
func TestRulesFilterSkillsResourcesAndPrompts(t *testing.T) {
	key := newClusterKey(t, "k1")
	dir := newContentDir(t)
	cfg := contentConfig(t, dir)
	cfg.Auth = identityConfig(t, key).Auth
	cfg.Auth.Authorization = &adapterconfig.Authorization{Rules: []adapterconfig.AuthorizationRule{
		{Tools: []string{"*"}},
		{Skills: []string{"acme/*"}, Resources: []string{"test://static-*"}, Prompts: []string{"test_simple_*"}, ServiceAccounts: []string{"agents/reader"}},
	}}
	srv := serve(t, cfg)
	reader := bearerHeader(key.token(t, "agents", "reader", "room"))
	other := bearerHeader(key.token(t, "agents", "other", "room"))

	skills, _ := listSkillPages(t, srv.baseURL, reader)
	if len(skills) != 1 || skills[0].URI != "skill://acme/billing/refunds/SKILL.md" {
		t.Errorf("the reader lists skills %v, want only acme's", skills)
	}
	if skills, _ := listSkillPages(t, srv.baseURL, other); len(skills) != 0 {
		t.Errorf("tools: [*] lists skills %v", skills)
	}
	c := connect(t, srv.baseURL, protocol20251125, reader)
	list, err := c.ListResources(testkit.Context(t, testTimeout), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	if slices.Contains(uris, "skill://git-workflow/SKILL.md") || !slices.Contains(uris, "skill://acme/billing/refunds/SKILL.md") || !slices.Contains(uris, "test://static-text") {
		t.Errorf("the reader lists resources %v", uris)
	}
	if templates, err := c.ListResourceTemplates(testkit.Context(t, testTimeout), mcp.ListResourceTemplatesRequest{}); err != nil || len(templates.ResourceTemplates) != 0 {
		t.Errorf("the reader lists templates %v (%v)", templates, err)
	}
	prompts, err := c.ListPrompts(testkit.Context(t, testTimeout), mcp.ListPromptsRequest{})
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "test_simple_prompt" {
		t.Errorf("the reader lists prompts %v (%v)", prompts, err)
	}
	for _, tc := range []struct {
		method string
		params any
	}{
		{"skills/get", map[string]string{"uri": "skill://git-workflow/SKILL.md"}},
		{"resources/read", map[string]string{"uri": "skill://git-workflow/SKILL.md"}},
		{"resources/directory/read", map[string]string{"uri": "skill://git-workflow"}},
		{"resources/read", map[string]string{"uri": "test://template/1/data"}},
		{"prompts/get", map[string]any{"name": "test_prompt_with_arguments", "arguments": map[string]string{"arg1": "a", "arg2": "b"}}},
	} {
		_, rpcErr := rpc(t, srv.baseURL, reader, tc.method, tc.params)
		if rpcErr == nil || rpcErr.Code != mcp.INVALID_PARAMS || !strings.HasPrefix(rpcErr.Message, "not_allowed: ") || strings.Contains(rpcErr.Message, "agents/") {
			t.Errorf("%s %v: %+v, want a not_allowed -32602 naming no rule", tc.method, tc.params, rpcErr)
		}
	}
	if _, rpcErr := rpc(t, srv.baseURL, reader, "resources/read", map[string]string{"uri": "skill://acme/billing/refunds/templates/email.md"}); rpcErr != nil {
		t.Errorf("the reader may read acme's files: %+v", rpcErr)
	}
}

// Reload sends resources/list_changed and prompts/list_changed when what is listed
// changes (a skill file's content included); content missing or not matching its
// digest is refused, at start and on reload, and the last good content stays served.
func TestReload_ContentChangesNotifyAndBadContentIsRefused(t *testing.T) {
	dir := newContentDir(t)
	cfg := contentConfig(t, dir)
	cfg.Stateless = false
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	baseURL, streams := servedWithStreams(t, srv)
	c, _ := listening(t, baseURL, adapterconfig.TransportStreamableHTTP, streams)
	changed := make(chan string, 8)
	c.OnNotification(func(n mcp.JSONRPCNotification) { changed <- n.Method })

	next := contentConfig(t, dir)
	next.Stateless = false
	next.AgentSkills[0] = dir.skill("git-workflow", "Branching rules", map[string]string{"SKILL.md": skillMD("git-workflow", "Branching rules") + "More.\n"})
	next.Prompts = next.Prompts[:1]
	if err := srv.Reload(next); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	got := []string{testkit.Receive(t, testTimeout, "a list_changed", changed), testkit.Receive(t, testTimeout, "another list_changed", changed)}
	slices.Sort(got)
	if want := []string{"notifications/prompts/list_changed", "notifications/resources/list_changed"}; !slices.Equal(got, want) {
		t.Errorf("notifications %v, want %v", got, want)
	}
	data, _ := readBytes(t, c, "skill://git-workflow/SKILL.md")
	if !strings.HasSuffix(string(data), "More.\n") {
		t.Errorf("SKILL.md after the reload = %q", data)
	}

	missing := contentConfig(t, dir)
	missing.Stateless = false
	missing.AgentSkills[0].Files[0].Digest = "sha256:" + strings.Repeat("0", 64)
	tampered := contentConfig(t, dir)
	tampered.Stateless = false
	if err := os.WriteFile(filepath.Join(dir.dir, adapterconfig.DigestHex(tampered.Resources[1].Content.Digest)), []byte("not a png at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]*adapterconfig.Config{"missing": missing, "tampered": tampered} {
		if err := srv.Reload(bad); err == nil || !strings.Contains(err.Error(), "content sha256:") {
			t.Errorf("Reload with %s content: %v, want a refusal naming the content", name, err)
		}
		if _, err := NewServer(bad); err == nil {
			t.Errorf("NewServer with %s content succeeded", name)
		}
	}
	if data, _ := readBytes(t, c, "skill://git-workflow/SKILL.md"); !strings.HasSuffix(string(data), "More.\n") {
		t.Errorf("the last good content is no longer served: %q", data)
	}
}

// A server serving only tools declares the capabilities it always did; one serving
// skills declares resources, prompts and the skills extension (streamable HTTP only).
func TestCapabilitiesFollowWhatIsServed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       func() *adapterconfig.Config
		transport string
		want      []string
	}{
		{"tools only", func() *adapterconfig.Config {
			return configWith(adapterconfig.TransportStreamableHTTP, true, templateTool("a", objectSchema, "A"))
		}, adapterconfig.TransportStreamableHTTP, []string{"logging", "tools"}},
		{"skills", func() *adapterconfig.Config { return contentConfig(t, newContentDir(t)) }, adapterconfig.TransportStreamableHTTP, []string{"extensions", "logging", "prompts", "resources", "tools"}},
		{"skills over sse", func() *adapterconfig.Config {
			c := contentConfig(t, newContentDir(t))
			c.Transport = adapterconfig.TransportSSE
			return c
		}, adapterconfig.TransportSSE, []string{"logging", "prompts", "resources", "tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.cfg())
			var c *client.Client
			if tc.transport == adapterconfig.TransportSSE {
				c = connectSSE(t, srv.baseURL, protocol20251125)
			} else {
				c = connect(t, srv.baseURL, protocol20251125, nil)
			}
			raw, _ := json.Marshal(c.GetServerCapabilities())
			var caps map[string]json.RawMessage
			_ = json.Unmarshal(raw, &caps)
			got := slices.Sorted(mapKeys(caps))
			if !slices.Equal(got, tc.want) {
				t.Errorf("capabilities %s, want keys %v", raw, tc.want)
			}
		})
	}
}
