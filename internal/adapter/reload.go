package adapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/cantus-dev/cantus-operator/internal/adapter/content"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
)

// Reload validates cfg and swaps the served tools in place, on the same MCP server:
// calls in flight finish on the tools they started with, new calls use the new ones,
// remotes whose URL, transport, header files and CA file did not change keep their
// pooled session, and when the tool list changed (a tool added, removed, or its
// description, schema or annotations changed) every client that listens gets one
// notifications/tools/list_changed: streamable HTTP clients with their GET stream open
// (stateful or stateless: mcp-go registers the stream as a session either way), SSE
// sessions, and 2026-07-28 clients listening with subscriptions/listen. A client with no
// open stream hears nothing and sees the new list when it lists again.
//
// Auth changes in place too: the token file, rotated issuer keys and the authorization
// rules apply to the next request, and so do another request state key file (a
// changed one is read again by itself) and the number of replicas.
//
// What the running server cannot change in place is refused with an error saying a
// restart is needed, and nothing is changed: the transport, port, stateless mode,
// memory tool and server info. An invalid cfg is refused the same way; the old tools
// keep being served.
func (s *Server) Reload(cfg *adapterconfig.Config) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	tools, err := compileConfig(cfg)
	if err != nil {
		return fmt.Errorf("invalid adapter config: %w", err)
	}
	// Content that is missing or differs from its digest is refused like an invalid
	// config: on Kubernetes the content volume and the config update at different
	// moments, and the next poll tries again.
	set, err := content.Load(cfg)
	if err != nil {
		return fmt.Errorf("adapter config content: %w", err)
	}
	search, err := buildSearch(cfg, set)
	if err != nil {
		return fmt.Errorf("tool search: %w", err)
	}
	if fixed := s.fixedFieldsChanged(cfg); len(fixed) > 0 {
		search.retire()
		return fmt.Errorf("the new config changes %s, which a running adapter cannot change in place: restart the adapter to apply it",
			strings.Join(fixed, ", "))
	}
	auth := authSettings(cfg, s.opts)
	if err := s.auth.Check(auth); err != nil {
		search.retire()
		return fmt.Errorf("invalid adapter config: auth: %w", err)
	}
	linked, err := s.remotes.PrepareAll(gatewayToolsOf(tools), set.ImportedItems())
	if err != nil {
		search.retire()
		return fmt.Errorf("remote tools: %w", err)
	}
	keyFileChanged := cfg.RequestStateKeyFile != s.cfg.RequestStateKeyFile
	if keyFileChanged && cfg.RequestStateKeyFile != "" {
		if _, err := gateway.ReadRequestStateKeys(cfg.RequestStateKeyFile); err != nil {
			search.retire()
			return fmt.Errorf("invalid adapter config: %w", err)
		}
	}
	if err := s.auth.Update(auth); err != nil {
		search.retire()
		return fmt.Errorf("invalid adapter config: auth: %w", err)
	}
	if keyFileChanged {
		if err := s.remotes.UseRequestStateKeyFile(cfg.RequestStateKeyFile); err != nil {
			// Read a moment ago: the file went away since, and the next reload tries again.
			s.log.Error(err, "the request state key file could not be read; the keys read before stay in use")
		} else {
			s.cfg.RequestStateKeyFile = cfg.RequestStateKeyFile
		}
	}
	s.cfg.BearerTokenFile, s.cfg.Auth = cfg.BearerTokenFile, cfg.Auth
	s.cfg.Replicas = cfg.Replicas
	s.remotes.Answers().SetReplicas(cfg.Replicas)

	old := s.state.Load()
	next := newToolSet(tools, cfg.Withheld)
	next.search = search
	s.state.Store(next)
	old.search.retire()
	// Before the remotes no longer used close, so that no subscription is lost with them.
	s.subscriptions.Retarget(set.SubscriptionTarget)
	s.remotes.Commit(linked)
	s.remotes.ForgetRevoked(revokedServiceAccounts(cfg.Auth))
	s.cfg.Tools, s.cfg.Withheld, s.cfg.Discovery = cfg.Tools, cfg.Withheld, cfg.Discovery
	d := diffToolSets(old, next)
	s.metrics.trackTools(append(d.added, metaToolNames(cfg)...))
	s.metrics.forgetTools(d.removed)
	if d.listChanged() || !maps.Equal(old.withheld, next.withheld) || !sameSearch(old.search, next.search) {
		// One notifications/tools/list_changed to every session that listens.
		s.mcp.SetTools(s.serverTools(next)...)
	}
	set.ReportLeftOut(s.log, s.metrics.imageSkillsLeftOut)
	s.content.Reload(s.mcp, cfg, set)
	if d.empty() {
		s.log.Info("config reloaded: the tools are unchanged")
	} else {
		s.log.Info("config reloaded", "added", d.added, "removed", d.removed,
			"listingChanged", d.listing, "backendChanged", d.backend, "notified", d.listChanged())
	}
	return nil
}

// fixedFieldsChanged names what cfg changes that Reload cannot apply.
func (s *Server) fixedFieldsChanged(cfg *adapterconfig.Config) []string {
	var changed []string
	if cfg.Transport != s.cfg.Transport {
		changed = append(changed, fmt.Sprintf("the transport (%s → %s)", s.cfg.Transport, cfg.Transport))
	}
	if cfg.Port != s.cfg.Port {
		changed = append(changed, fmt.Sprintf("the port (%d → %d)", s.cfg.Port, cfg.Port))
	}
	if cfg.Stateless != s.cfg.Stateless {
		changed = append(changed, "stateless")
	}
	if !reflect.DeepEqual(cfg.Memory, s.cfg.Memory) {
		changed = append(changed, "the memory tool (memory)")
	}
	if cfg.Server != s.cfg.Server {
		changed = append(changed, "the server info (name, version, instructions)")
	}
	if !reflect.DeepEqual(cfg.Limits, s.cfg.Limits) {
		changed = append(changed, "the call limits (limits)")
	}
	if content.ServesCompletions(cfg) != content.ServesCompletions(&s.cfg) {
		changed = append(changed, "whether imported prompts or resource templates are served (the completions capability is declared at start)")
	}
	if adapterconfig.RelaysSubscriptions(cfg) != s.subscriptions.Relays() {
		changed = append(changed, "whether resource subscriptions are relayed to imports' remotes (resources.subscribe is declared at start)")
	}
	if content.ServesSkills(cfg) != content.ServesSkills(&s.cfg) {
		changed = append(changed, "whether agent skills are served (the skills extension is declared at start)")
	}
	return changed
}

// toolDiff is what a reload changed, by tool name.
type toolDiff struct {
	added, removed []string
	// listing: the tools/list entry changed; backend: only the backend did.
	listing, backend []string
}

func (d toolDiff) listChanged() bool {
	return len(d.added)+len(d.removed)+len(d.listing) > 0
}

func (d toolDiff) empty() bool { return !d.listChanged() && len(d.backend) == 0 }

func diffToolSets(old, next *toolSet) toolDiff {
	var d toolDiff
	for _, t := range next.tools {
		prev := old.byName[t.Name]
		switch {
		case prev == nil:
			d.added = append(d.added, t.Name)
		case !sameListing(prev, t):
			d.listing = append(d.listing, t.Name)
		case !reflect.DeepEqual(backendOf(prev), backendOf(t)):
			d.backend = append(d.backend, t.Name)
		}
	}
	for _, t := range old.tools {
		if next.byName[t.Name] == nil {
			d.removed = append(d.removed, t.Name)
		}
	}
	return d
}

// sameListing reports whether a and b have the same tools/list entry, listed to the
// same callers.
func sameListing(a, b *compiledTool) bool {
	ja, errA := json.Marshal(listing.Tool(&a.Tool))
	jb, errB := json.Marshal(listing.Tool(&b.Tool))
	return errA == nil && errB == nil && bytes.Equal(ja, jb) && sameRemoteListing(a.Remote, b.Remote)
}

// sameRemoteListing reports whether two remote backends list their tool alike: the
// same definitions, to callers of the same eras and capabilities.
func sameRemoteListing(a, b *adapterconfig.RemoteBackend) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Definition, b.Definition) && bytes.Equal(a.ModernDefinition, b.ModernDefinition) &&
		slices.Equal(a.Eras, b.Eras) && slices.Equal(a.RemoteEras, b.RemoteEras) && slices.Equal(a.Needs, b.Needs)
}

func backendOf(t *compiledTool) [3]any {
	return [3]any{t.Template, t.HTTP, t.Remote}
}

// revokedServiceAccounts are the UIDs of the deleted service accounts (and pods) the
// config's issuers refuse, whose cached upstream credentials the gateway drops.
func revokedServiceAccounts(auth *adapterconfig.AuthConfig) map[string]bool {
	out := map[string]bool{}
	if auth == nil {
		return out
	}
	for _, iss := range auth.Issuers {
		for _, uid := range iss.RevokedServiceAccountUIDs {
			out[uid] = true
		}
		for _, uid := range iss.RevokedUIDs {
			out[uid] = true
		}
	}
	return out
}
