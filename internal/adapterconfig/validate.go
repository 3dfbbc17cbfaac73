package adapterconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/net/http/httpguts"

	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// toolNamePattern is the MCP tool name grammar (spec 2025-11-25, "Tool names").
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// CompiledTool is a Tool with everything that can fail checked and prepared once, so
// that a call never re-parses its template or schema.
type CompiledTool struct {
	*Tool
	// Schema validates the tool's arguments.
	Schema *jsonschema.Schema
	// Template is the parsed template backend, nil for other backends.
	Template *template.Template
}

// Validate checks a Config without serving it. Every problem is reported, joined, so a
// user fixes a config in one round.
func Validate(cfg *Config) error {
	_, err := Compile(cfg)
	return err
}

// Compile validates cfg and returns its tools with their schemas and templates
// compiled, in config order. Every problem is reported, joined.
func Compile(cfg *Config) ([]CompiledTool, error) {
	if cfg == nil {
		return nil, errors.New("adapter config is missing")
	}
	var errs []error
	switch cfg.Transport {
	case TransportStreamableHTTP, TransportSSE:
	default:
		errs = append(errs, fmt.Errorf("transport %q is not supported: use %q or %q",
			cfg.Transport, TransportStreamableHTTP, TransportSSE))
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is out of range: use 0..65535 (0 picks a free port)", cfg.Port))
	}

	firstIndexOf := make(map[string]int, len(cfg.Tools))
	tools := make([]CompiledTool, 0, len(cfg.Tools))
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		if first, seen := firstIndexOf[t.Name]; seen {
			errs = append(errs, fmt.Errorf("tool %q (tools[%d]): the name is already used by tools[%d]: tool names must be unique",
				t.Name, i, first))
		} else {
			firstIndexOf[t.Name] = i
		}
		compiled, toolErrs := compileTool(i, t)
		errs = append(errs, toolErrs...)
		tools = append(tools, compiled)
	}
	errs = append(errs, validateWithheld(cfg.Withheld, firstIndexOf)...)
	errs = append(errs, validateMemory(cfg.Memory, toolNames(cfg.Tools))...)
	errs = append(errs, validateContent(cfg)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tools, nil
}

// compileTool checks one tool and returns it prepared, with every problem it found.
func compileTool(index int, t *Tool) (CompiledTool, []error) {
	compiled, problems := prepareTool(t)
	errs := make([]error, 0, len(problems))
	for _, p := range problems {
		errs = append(errs, fmt.Errorf("tool %q (tools[%d]): %s", ClipName(t.Name), index, p))
	}
	return compiled, errs
}

// ClipName keeps a name short enough to quote in a message: names can come from a remote.
func ClipName(name string) string { return clip.Line(name, 64) }

// prepareTool compiles what a call needs and lists what is wrong with t.
func prepareTool(t *Tool) (CompiledTool, []string) {
	var problems []string
	fail := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	compiled := CompiledTool{Tool: t}

	if !toolNamePattern.MatchString(t.Name) {
		fail("invalid name: use 1-128 characters of A-Z, a-z, 0-9, '_', '-' and '.'")
	}

	schema, err := CompileInputSchema(t.InputSchema)
	if err == nil {
		err = checkSchemaCost(schema)
	}
	if err != nil {
		fail("%v", err)
	} else {
		compiled.Schema = schema
		if err := mcp.ValidateParamHeaderAnnotations(&mcp.Tool{Name: t.Name, RawInputSchema: t.InputSchema}); err != nil {
			// mcp-go panics when registering such a tool, so it must be refused here.
			fail("inputSchema: %v", err)
		}
	}

	switch backends := countBackends(t); backends {
	case 1:
	case 0:
		fail("no backend: set exactly one of template, http or remote")
	default:
		fail("%d backends: set exactly one of template, http or remote", backends)
	}
	if t.Template != nil {
		tmpl, err := parseToolTemplate(t.Name, t.Template.Text)
		if err != nil {
			fail("template does not parse: %v", err)
		}
		compiled.Template = tmpl
	}
	if t.HTTP != nil {
		for _, msg := range httpBackendProblems(t.HTTP) {
			fail("%s", msg)
		}
	}
	if t.Remote != nil {
		for _, msg := range remoteBackendProblems(t.Remote) {
			fail("%s", msg)
		}
	}
	return compiled, problems
}

// CheckTool reports why the adapter would refuse to serve t, or nil. The operator uses it
// to leave out one imported tool instead of refusing the whole server.
func CheckTool(t *Tool) error {
	if _, problems := prepareTool(t); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func countBackends(t *Tool) int {
	n := 0
	if t.Template != nil {
		n++
	}
	if t.HTTP != nil {
		n++
	}
	if t.Remote != nil {
		n++
	}
	return n
}

// remoteBackendProblems checks a remote backend without touching its files: the
// controller validates configs where the Secrets are not mounted. NewServer and Reload
// read the files.
func remoteBackendProblems(r *RemoteBackend) []string {
	var problems []string
	if strings.TrimSpace(r.Import) == "" {
		problems = append(problems, `remote.import is empty: name the RemoteToolImport as "namespace/name"`)
	}
	u, err := url.Parse(r.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		problems = append(problems, fmt.Sprintf("remote.url %q must be an absolute http or https URL with a host, e.g. http://svc.ns.svc:8765/mcp", r.URL))
	case u.User != nil:
		problems = append(problems, "remote.url carries credentials: put them in a header file instead")
	}
	switch r.Transport {
	case TransportStreamableHTTP, TransportSSE:
	default:
		problems = append(problems, fmt.Sprintf("remote.transport %q is not supported: use %q or %q", r.Transport, TransportStreamableHTTP, TransportSSE))
	}
	if !toolNamePattern.MatchString(r.RemoteName) {
		problems = append(problems, fmt.Sprintf("remote.remoteName %q is not a valid MCP tool name: use 1-128 of the characters A-Z a-z 0-9 . _ -", r.RemoteName))
	}
	for _, name := range slices.Sorted(maps.Keys(r.HeaderFiles)) {
		if !httpguts.ValidHeaderFieldName(name) {
			problems = append(problems, fmt.Sprintf("remote.headerFiles: %q is not a valid HTTP header name", name))
		}
		if strings.TrimSpace(r.HeaderFiles[name]) == "" {
			problems = append(problems, fmt.Sprintf("remote.headerFiles[%q] names no file", name))
		}
	}
	if r.Timeout.Duration <= 0 {
		problems = append(problems, fmt.Sprintf("remote.timeout %q must be greater than 0, e.g. \"30s\"", r.Timeout.Duration))
	}
	for _, kind := range r.Relay {
		if kind != RelayElicitation && kind != RelaySampling && kind != RelayRoots {
			problems = append(problems, fmt.Sprintf("remote.relay: %q is not a request the gateway relays: use %q, %q or %q", kind, RelayElicitation, RelaySampling, RelayRoots))
		}
	}
	problems = append(problems, erasProblems("remote.eras", r.Eras)...)
	problems = append(problems, erasProblems("remote.remoteEras", r.RemoteEras)...)
	for i, ext := range r.Extensions {
		if ext != ExtensionTasks || slices.Index(r.Extensions, ext) != i {
			problems = append(problems, fmt.Sprintf("remote.extensions: %q is not an extension a gateway passes through, or is named twice: use %q", ClipName(ext), ExtensionTasks))
		}
	}
	for _, a := range r.Addresses {
		if _, err := netip.ParseAddr(a); err != nil {
			problems = append(problems, fmt.Sprintf("remote.addresses: %q is not an IP address", a))
		}
	}
	if len(r.Definition) > 0 {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(r.Definition, &members); err != nil || members == nil {
			problems = append(problems, "remote.definition is not a JSON object (the remote's tool definition)")
		}
	}
	if len(r.ModernDefinition) > 0 {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(r.ModernDefinition, &members); err != nil || members == nil {
			problems = append(problems, "remote.modernDefinition is not a JSON object (the remote's tool definition in "+EraModern+")")
		}
	}
	return problems
}

// erasProblems refuses a list of eras naming something else, or one twice.
func erasProblems(field string, eras []string) []string {
	var problems []string
	for i, era := range eras {
		if (era != EraLegacy && era != EraModern) || slices.Index(eras, era) != i {
			problems = append(problems, fmt.Sprintf("%s: %q is not an era, or is named twice: use %q and/or %q", field, ClipName(era), EraLegacy, EraModern))
		}
	}
	return problems
}

func httpBackendProblems(h *HTTPBackend) []string {
	var problems []string
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		problems = append(problems, fmt.Sprintf("http.url %q must be an absolute http or https URL with a host, e.g. http://svc.ns.svc:8080/path", h.URL))
	}
	if h.Timeout.Duration <= 0 {
		problems = append(problems, fmt.Sprintf("http.timeout %q must be greater than 0, e.g. \"10s\"", h.Timeout.Duration))
	}
	if h.MaxResponseBytes <= 0 {
		problems = append(problems, fmt.Sprintf("http.maxResponseBytes %d must be greater than 0, e.g. 1048576", h.MaxResponseBytes))
	}
	return problems
}

// schemaResourceURL names the schema inside its own compiler; each tool has its own
// compiler, so the same name never clashes.
const schemaResourceURL = "mem:///inputSchema.json"

// CompileInputSchema checks that raw is an object schema and compiles it (draft
// 2020-12 unless "$schema" names another draft).
func CompileInputSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New(`inputSchema is missing: use {"type":"object"} for a tool without arguments`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("inputSchema is not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New(`inputSchema must be a JSON object with "type": "object"`)
	}
	if obj["type"] != "object" {
		return nil, fmt.Errorf(`inputSchema must have "type": "object" (MCP tool arguments are an object), found "type": %s`, jsonText(obj["type"]))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Schemas must be self-contained: a $ref to a file or URL would make the adapter
	// read the pod's filesystem or the network while loading its config.
	c.UseLoader(refuseExternalRefs{})
	if err := c.AddResource(schemaResourceURL, doc); err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	schema, err := c.Compile(schemaResourceURL)
	if err != nil {
		return nil, fmt.Errorf("inputSchema does not compile as JSON Schema: %s", describeCompileError(err))
	}
	return schema, nil
}

// describeCompileError turns the library's multi-line metaschema report into one line
// that points into the schema, fit for a status condition.
func describeCompileError(err error) string {
	var invalid *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &invalid) && errors.As(invalid.Err, &verr) {
		return DescribeValidationError(verr)
	}
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		return load.Err.Error()
	}
	return err.Error()
}

type refuseExternalRefs struct{}

func (refuseExternalRefs) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not allowed: put the definition under $defs", url)
}

func jsonText(v any) string {
	if v == nil {
		return "(missing)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// parseToolTemplate parses a template backend. missingkey=error turns a forgotten
// argument into a tool error instead of rendering "<no value>".
func parseToolTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=error").Funcs(TemplateFuncs).Parse(text)
}

func toolNames(tools []Tool) []string {
	names := make([]string, len(tools))
	for i := range tools {
		names[i] = tools[i].Name
	}
	return names
}

// maxWithheldReasonBytes bounds the answer to a call of a withheld tool.
const maxWithheldReasonBytes = 4 << 10

// validateWithheld checks that each withheld tool has a name of its own and a reason.
func validateWithheld(withheld []WithheldTool, toolIndex map[string]int) []error {
	var errs []error
	seen := map[string]bool{}
	for i, w := range withheld {
		_, served := toolIndex[w.Name]
		switch {
		case w.Name == "":
			errs = append(errs, fmt.Errorf("withheld[%d]: the name is empty", i))
		case seen[w.Name]:
			errs = append(errs, fmt.Errorf("withheld[%d] %q: listed twice", i, ClipName(w.Name)))
		case served:
			errs = append(errs, fmt.Errorf("withheld[%d] %q: a served tool has that name", i, ClipName(w.Name)))
		case w.Reason == "" || len(w.Reason) > maxWithheldReasonBytes:
			errs = append(errs, fmt.Errorf("withheld[%d] %q: the reason must be 1 to %d bytes", i, ClipName(w.Name), maxWithheldReasonBytes))
		}
		seen[w.Name] = true
	}
	return errs
}
