package adapterconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ImportedContent is what a gateway re-exports of its imports besides tools: their
// prompts, resources and resource templates, each served as its remote listed it and
// forwarded to that remote when read or got.
type ImportedContent struct {
	Prompts           []ImportedItem `json:"prompts,omitempty"`
	Resources         []ImportedItem `json:"resources,omitempty"`
	ResourceTemplates []ImportedItem `json:"resourceTemplates,omitempty"`
	// Skills are Agent Skills, keyed by the served URI of their SKILL.md; each
	// definition is the remote's skills/list entry with its URIs as served. Their files
	// are among Resources.
	Skills []ImportedItem `json:"skills,omitempty"`
}

// ImportedItem is one imported prompt, resource or resource template.
type ImportedItem struct {
	// Key is what the item is served as: a prompt's served name (prefixed or renamed),
	// a resource's URI, a template's URI template.
	Key string `json:"key"`
	// Definition is the remote's list entry as sent; a prompt's is served with Key as
	// its name.
	Definition json.RawMessage `json:"definition"`
	// RemoteKey is the key at the remote when it differs from Key: the URI of a skill's
	// file that a prefix moved (skill://<prefix>/…); reads ask the remote for it.
	RemoteKey string `json:"remoteKey,omitempty"`
	// Remote reaches the import; its RemoteName is a prompt's name at the remote and
	// empty for resources and templates.
	Remote RemoteBackend `json:"remote"`
}

// Empty says there is nothing imported.
func (c *ImportedContent) Empty() bool {
	return c == nil || len(c.Prompts)+len(c.Resources)+len(c.ResourceTemplates)+len(c.Skills) == 0
}

// RelaysSubscriptions says whether a gateway of cfg relays resource subscriptions: it
// keeps sessions (stateful streamable HTTP, where the adapter reads each request before
// mcp-go) and an imported resource or template comes from a remote that offers them.
// It declares resources.subscribe then, which it does only when it starts.
func RelaysSubscriptions(cfg *Config) bool {
	if cfg.Stateless || cfg.Transport == TransportSSE || cfg.Imported.Empty() {
		return false
	}
	return SubscribableImports(cfg)
}

// SubscribableImports says whether an imported resource or template of cfg comes from a
// remote that offers subscriptions, whatever the gateway's transport.
func SubscribableImports(cfg *Config) bool {
	if cfg.Imported.Empty() {
		return false
	}
	for _, items := range [][]ImportedItem{cfg.Imported.Resources, cfg.Imported.ResourceTemplates} {
		for _, it := range items {
			if it.Remote.Subscribe {
				return true
			}
		}
	}
	return false
}

// Bounds of imported content: a remote is not trusted, and the status it came from
// holds at most these (see the RemoteToolImport status).
const (
	MaxImportedKeyBytes        = 4 << 10
	MaxImportedDefinitionBytes = 64 << 10
)

// validateImported checks the imported items: keys unique per kind and bounded,
// definitions JSON objects, remote backends usable, templates RFC 6570.
func validateImported(c *ImportedContent) []error {
	if c.Empty() {
		return nil
	}
	var errs []error
	for _, kind := range []struct {
		name  string
		items []ImportedItem
	}{{ImportedPrompts, c.Prompts}, {ImportedResources, c.Resources}, {ImportedResourceTemplates, c.ResourceTemplates}, {ImportedSkills, c.Skills}} {
		seen := map[string]bool{}
		for i, item := range kind.items {
			where := fmt.Sprintf("imported.%s[%d] (%q)", kind.name, i, ClipName(item.Key))
			if seen[item.Key] {
				errs = append(errs, fmt.Errorf("%s: the key is served twice", where))
			}
			seen[item.Key] = true
			if err := CheckImportedItem(kind.name, item); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	return errs
}

// Kinds of imported items, as CheckImportedItem takes them.
const (
	ImportedPrompts           = "prompts"
	ImportedResources         = "resources"
	ImportedResourceTemplates = "resourceTemplates"
	ImportedSkills            = "skills"
)

// CheckImportedItem checks one imported item of kind (ImportedPrompts, …) as the
// adapter's config validation does; render leaves out an item that fails rather than
// refusing the whole config.
func CheckImportedItem(kind string, item ImportedItem) error {
	if problems := importedItemProblems(kind, item); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func importedItemProblems(kind string, item ImportedItem) []string {
	var problems []string
	if item.Key == "" || len(item.Key) > MaxImportedKeyBytes {
		problems = append(problems, fmt.Sprintf("the key must hold 1 to %d bytes", MaxImportedKeyBytes))
	}
	var members map[string]json.RawMessage
	if len(item.Definition) > MaxImportedDefinitionBytes || json.Unmarshal(item.Definition, &members) != nil || members == nil {
		problems = append(problems, fmt.Sprintf("the definition must be a JSON object of at most %d bytes", MaxImportedDefinitionBytes))
	}
	backend := item.Remote
	// A prompt's remote name follows no grammar (a tool's does): remoteBackendProblems
	// checks the rest of the backend.
	backend.RemoteName, backend.Definition = "item", nil
	problems = append(problems, remoteBackendProblems(&backend)...)
	if kind == ImportedPrompts && item.Remote.RemoteName == "" {
		problems = append(problems, "remote.remoteName names no prompt")
	}
	if kind == ImportedSkills && (!strings.HasPrefix(item.Key, SkillURIScheme) || !strings.HasSuffix(item.Key, "/"+SkillManifestFile)) {
		problems = append(problems, "a skill's key must be the skill:// URI of its "+SkillManifestFile)
	}
	if kind == ImportedResourceTemplates {
		if _, err := CompileURITemplate(item.Key); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems
}
