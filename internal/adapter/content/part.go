// Package content serves what an adapter serves besides tools: Agent Skills (the
// skills/ methods and their files), resources, resource templates and prompts, its own
// and imported ones, and completions about imported prompts and templates. The server
// holds one Part and swaps its Set on reload.
package content

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapter/subscribe"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Part serves what a server serves besides tools: Agent Skills, resources, resource
// templates and prompts, its own and imported ones, and completions about them. A
// reload swaps its Set.
type Part struct {
	set atomic.Pointer[Set]
	// cfg is the server's config; Reload updates its content fields.
	cfg    *adapterconfig.Config
	filter *admission.Filter
	log    logr.Logger
	// subscriptions answers resources/subscribe and unsubscribe.
	subscriptions *subscribe.Relay
	// postToBackend posts a template's or prompt's arguments to its HTTP backend.
	postToBackend func(ctx context.Context, b *adapterconfig.HTTPBackend, args []byte) *mcp.CallToolResult
	// streamable says whether the server serves streamable HTTP, where it reads each
	// request before mcp-go.
	streamable func() bool
	// servedTemplates: mcp-go holds resource templates (it cannot list them back).
	servedTemplates bool
}

// Deps are what the content part needs of the server.
type Deps struct {
	Config        *adapterconfig.Config
	Filter        *admission.Filter
	Log           logr.Logger
	Subscriptions *subscribe.Relay
	PostToBackend func(ctx context.Context, b *adapterconfig.HTTPBackend, args []byte) *mcp.CallToolResult
	Streamable    func() bool
}

// New is the part serving set.
func New(set *Set, d Deps) *Part {
	cp := &Part{cfg: d.Config, filter: d.Filter, log: d.Log, subscriptions: d.Subscriptions, postToBackend: d.PostToBackend, streamable: d.Streamable}
	cp.set.Store(set)
	return cp
}

// Set is the content served now.
func (cp *Part) Set() *Set { return cp.set.Load() }

// Options are the mcp-go options of the content and completions served.
func (cp *Part) Options() []server.ServerOption {
	return append(cp.contentOptions(cp.set.Load()), cp.completionOptions()...)
}

// Register gives m the content served now.
func (cp *Part) Register(m *server.MCPServer) {
	set := cp.set.Load()
	cp.registerFiles(m, set)
	cp.registerTemplates(m, set)
	cp.registerPrompts(m, set)
}

// Hooks filter every resources/list, resources/templates/list and prompts/list answer
// down to what its caller may read or get.
func (cp *Part) Hooks(hooks *server.Hooks) { cp.contentHooks(hooks) }

// ServeRequest answers body when it is a request the part answers before mcp-go, and
// reports whether it did; when it did not, nothing was written.
func (cp *Part) ServeRequest(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return cp.serveContentRequest(w, r, body)
}

// ListWriter rewrites the answer to body when it lists prompts, resources or resource
// templates and imported ones are served; nil otherwise.
func (cp *Part) ListWriter(w http.ResponseWriter, body []byte) *gateway.AnswerRewriter {
	return cp.importedListWriter(w, body)
}

// MayRead says whether the caller of ctx may read uri.
func (cp *Part) MayRead(ctx context.Context, uri string) bool {
	kind, name := cp.set.Load().resourceItem(uri)
	return cp.filter.Allows(ctx, kind, name)
}

// OffersSubscriptions says whether an import served now offers subscriptions.
func (cp *Part) OffersSubscriptions() bool { return cp.set.Load().imported.offersSubscriptions() }

// ImportedItems are the imported items of set, which the gateway's remotes serve.
func (set *Set) ImportedItems() []*gateway.Item { return set.imported.items() }

// Reload swaps the skills, resources and prompts served, and tells listening
// clients when their lists changed; cfg is the config next was loaded from.
func (cp *Part) Reload(m *server.MCPServer, cfg *adapterconfig.Config, next *Set) {
	old := cp.set.Swap(next)
	cp.cfg.ContentDir, cp.cfg.AgentSkills, cp.cfg.ImageSkills, cp.cfg.Resources = cfg.ContentDir, cfg.AgentSkills, cfg.ImageSkills, cfg.Resources
	cp.cfg.ResourceTemplates, cp.cfg.Prompts, cp.cfg.Imported = cfg.ResourceTemplates, cfg.Prompts, cfg.Imported
	filesChanged := !bytes.Equal(filesListing(old), filesListing(next))
	templatesChanged := !bytes.Equal(templatesListing(old), templatesListing(next))
	promptsChanged := !bytes.Equal(promptsListing(old), promptsListing(next))
	// Each sends its notifications/resources/list_changed (mcp-go has no quiet set).
	if filesChanged {
		cp.registerFiles(m, next)
	}
	if templatesChanged {
		cp.registerTemplates(m, next)
	}
	resourcesChanged := filesChanged || templatesChanged
	if promptsChanged {
		cp.registerPrompts(m, next)
	}
	if resourcesChanged || promptsChanged {
		cp.log.Info("content reloaded", "skills", len(next.skills), "resources", len(next.files),
			"resourceTemplates", len(next.templates), "prompts", len(next.prompts),
			"resourcesChanged", resourcesChanged, "promptsChanged", promptsChanged)
	}
}

// ReportLeftOut logs each image skill the content set leaves out, with why, and sets
// gauge, which the operator's users alert on: the operator sees only that the pods do not
// list the skill (Verified=False, ImageSkillsLeftOut), the pod's log says why.
func (set *Set) ReportLeftOut(log logr.Logger, gauge prometheus.Gauge) {
	gauge.Set(float64(len(set.leftOut)))
	for _, l := range set.leftOut {
		log.Error(l.err, "image skill left out: it breaks an Agent Skills rule or a limit, so it is not served",
			"skill", l.skill.Path, "image", l.skill.Source, "dir", l.skill.Dir)
	}
}

// ServesSkills says whether cfg serves Agent Skills, its own or imported ones.
func ServesSkills(cfg *adapterconfig.Config) bool {
	return len(cfg.AgentSkills)+len(cfg.ImageSkills) > 0 || (cfg.Imported != nil && len(cfg.Imported.Skills) > 0)
}

// Subscribable is the imported item of set that serves uri and whose remote offers
// subscriptions; otherwise why uri cannot be subscribed to.
func (set *Set) Subscribable(uri string) (*gateway.Item, string) {
	if set.files[uri] != nil || (set.matchesTemplate(uri) && set.imported.resources[uri] == nil) {
		return nil, fmt.Sprintf("resource %s is this server's own: it changes only when the server's config does, which notifications/resources/list_changed announces; subscriptions are relayed to the remotes of imported resources only", uri)
	}
	it := set.imported.resourceFor(uri)
	if it == nil {
		return nil, fmt.Sprintf("resource %s is not served by any import of this gateway, so there is nothing to subscribe to: list the resources again", uri)
	}
	if err := set.imported.ambiguity(uri); err != nil {
		return nil, err.Error()
	}
	if !it.Backend.Subscribe {
		return nil, fmt.Sprintf("resource %s comes from import %s, whose remote does not offer subscriptions (it did not declare resources.subscribe)", uri, it.Backend.Import)
	}
	if it.Backend.CallerCredentials != nil {
		return nil, fmt.Sprintf("resource %s comes from import %s, which acts as each caller at its remote; subscriptions to it are not relayed, since one shared subscription would reach the remote as nobody's: read the resource again instead", uri, it.Backend.Import)
	}
	return it, ""
}

// SubscriptionTarget is the imported item that serves uri in set, nil where none or
// several do: where a subscription to uri goes after a reload to set.
func (set *Set) SubscriptionTarget(uri string) *gateway.Item {
	if set.imported.ambiguity(uri) != nil {
		return nil
	}
	return set.importedServing(uri)
}

// offersSubscriptions says whether a resource or template of the imported set comes from a
// remote that offers subscriptions.
func (set *importedSet) offersSubscriptions() bool {
	for _, r := range set.resources {
		if r.item.Backend.Subscribe && r.item.Backend.CallerCredentials == nil {
			return true
		}
	}
	for _, t := range set.templates {
		if t.item.Backend.Subscribe && t.item.Backend.CallerCredentials == nil {
			return true
		}
	}
	return false
}
