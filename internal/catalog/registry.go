package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/clip"
)

// The MCP Registry API (v0.1) over the catalog, so that registry clients (VS Code's MCP
// gallery, ToolHive, sub-registries that mirror one) list the cluster's SkillServers
// with no glue:
//
//	GET /v0.1/servers?limit=&cursor=&search=&version=latest&updated_since=RFC3339
//	GET /v0.1/servers/{name}/versions            the one version the cluster serves
//	GET /v0.1/servers/{name}/versions/{version}  that version, or "latest"
//
// It answers each caller as the rest of the catalog does: servers of the namespaces it
// may list, and tool counts of the tools their rules let it call.
//
// Names. A SkillServer <name> in namespace <ns> is "<reversed domain>.<ns>/<name>", the
// domain being the operator's --registry-domain (its --cluster-domain when empty):
// SkillServer books in team-a of cluster.local is "local.cluster.team-a/books". In a
// path the slash is URL-encoded: /v0.1/servers/local.cluster.team-a%2Fbooks/versions/latest.
// A server whose name would pass the 200 characters server.json allows is left out, and
// so is one with no URL yet (not rendered, or its Service not up): a registry client
// offers every server it lists, and there is nothing to connect to.
//
// Versions. "<serverInfo.version>+cfg.<status.configHash>" (serverInfo.version
// defaults to 0.0.0): the build metadata changes whenever the rendered adapter config,
// and with it what the server serves, changes. Before the operator has rendered a server
// it is "+gen.<metadata.generation>".
//
// Times. updatedAt is the newest of the creation time and the status conditions' last
// transition times; updated_since keeps the servers updated at or after it.
//
// Cursors. The list is ordered by name and a cursor is the last name returned: the next
// page starts after it, so servers added or deleted between pages neither shift nor
// repeat the others.

// ServerSchema is the server.json schema the registry's answers follow.
const ServerSchema = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

const (
	defaultRegistryLimit = 30
	maxRegistryLimit     = 100
	maxServerNameLength  = 200
	maxDescriptionLength = 100
)

// RegistryServer is one server.json.
type RegistryServer struct {
	Schema      string           `json:"$schema"`
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description"`
	Version     string           `json:"version"`
	Remotes     []RegistryRemote `json:"remotes,omitempty"`
}

// RegistryRemote is how a client connects: the SkillServer's Service URL.
type RegistryRemote struct {
	Type    string           `json:"type"`
	URL     string           `json:"url"`
	Headers []RegistryHeader `json:"headers,omitempty"`
}

// RegistryHeader is a header the client must send, such as its bearer token.
type RegistryHeader struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	IsRequired  bool   `json:"isRequired,omitempty"`
	IsSecret    bool   `json:"isSecret,omitempty"`
}

// RegistryEntry is one server in an answer, with the registry's metadata beside it.
type RegistryEntry struct {
	Server RegistryServer `json:"server"`
	Meta   RegistryMeta   `json:"_meta"`
}

// RegistryMeta is the _meta of an answer: the lifecycle facts generic clients read under
// the registry API's own key, and what the cluster knows of the server under cantus'.
type RegistryMeta struct {
	Official OfficialMeta    `json:"io.modelcontextprotocol.registry/official"`
	Cluster  SkillServerMeta `json:"dev.cantus/skillserver"`
}

// OfficialMeta is the lifecycle of a server as the registry API names it.
type OfficialMeta struct {
	Status      string    `json:"status"`
	PublishedAt time.Time `json:"publishedAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	IsLatest    bool      `json:"isLatest"`
}

// SkillServerMeta is what the cluster knows of a server.
type SkillServerMeta struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Tools counts the tools the caller may call.
	Tools int  `json:"tools"`
	Ready bool `json:"ready"`
	// Discovery is how the server lists its tools: All or Search.
	Discovery string `json:"discovery"`
	// VerifiedConfigHash is the rendered config the operator listed the tools of through
	// the Service (Verified=True); empty when not verified.
	VerifiedConfigHash string `json:"verifiedConfigHash,omitempty"`
	// ImportDigests are the catalog digests of the RemoteToolImports the server re-exports.
	ImportDigests map[string]string `json:"importDigests,omitempty"`
	// ImportEras are the MCP protocol eras the remote of each re-exported import
	// serves ("2026-07-28", "2025-11-25"), as its last handshake found them.
	ImportEras map[string][]string `json:"importEras,omitempty"`
	// AgentSkills maps the SKILL.md URI of each Agent Skill the caller may load to its
	// manifest digest, which a client compares with the server's skills/list entry.
	AgentSkills map[string]string `json:"agentSkills,omitempty"`
}

// registryList is the answer of GET /v0.1/servers.
type registryList struct {
	Servers  []RegistryEntry `json:"servers"`
	Metadata registryPage    `json:"metadata"`
}

type registryPage struct {
	NextCursor string `json:"nextCursor,omitempty"`
	Count      int    `json:"count"`
}

// registryQuery is what GET /v0.1/servers was asked.
type registryQuery struct {
	limit        int
	cursor       string
	search       string
	version      string
	updatedSince time.Time
}

var errBadQuery = errors.New("bad query")

func parseRegistryQuery(r *http.Request) (registryQuery, error) {
	q := r.URL.Query()
	query := registryQuery{limit: defaultRegistryLimit, cursor: q.Get("cursor"), search: strings.ToLower(q.Get("search")), version: q.Get("version")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRegistryLimit {
			return query, fmt.Errorf("%w: limit must be an integer from 1 to %d", errBadQuery, maxRegistryLimit)
		}
		query.limit = n
	}
	if s := q.Get("updated_since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return query, fmt.Errorf("%w: updated_since must be an RFC 3339 time: %w", errBadQuery, err)
		}
		query.updatedSince = t
	}
	return query, nil
}

// keeps says whether a server passes the query's filters (not its page).
func (q registryQuery) keeps(e RegistryEntry) bool {
	if q.search != "" && !strings.Contains(strings.ToLower(e.Server.Name), q.search) {
		return false
	}
	// Each server has one version, the latest, so "latest" keeps them all.
	if q.version != "" && q.version != "latest" && q.version != e.Server.Version {
		return false
	}
	return q.updatedSince.IsZero() || !e.Meta.Official.UpdatedAt.Before(q.updatedSince)
}

// page returns the entries after the cursor, at most limit, and the next cursor.
func (q registryQuery) page(sorted []RegistryEntry) ([]RegistryEntry, string) {
	start, _ := slices.BinarySearchFunc(sorted, q.cursor, func(e RegistryEntry, cursor string) int {
		return cmp.Compare(e.Server.Name, cursor)
	})
	if start < len(sorted) && q.cursor != "" && sorted[start].Server.Name == q.cursor {
		start++
	}
	end := min(start+q.limit, len(sorted))
	out := sorted[start:end]
	if end < len(sorted) && len(out) > 0 {
		return out, out[len(out)-1].Server.Name
	}
	return out, ""
}

func (h *handler) registerRegistry(mux *http.ServeMux) {
	mux.HandleFunc("GET /v0.1/servers", h.registryServers)
	mux.HandleFunc("GET /v0.1/servers/{name}/versions", h.registryVersions)
	mux.HandleFunc("GET /v0.1/servers/{name}/versions/{version}", h.registryVersion)
}

func (h *handler) registryServers(w http.ResponseWriter, r *http.Request) {
	query, err := parseRegistryQuery(r)
	if err != nil {
		h.fail(w, err, http.StatusBadRequest)
		return
	}
	entries, err := h.catalog.RegistryEntries(r.Context(), viewerFrom(r.Context()))
	if err != nil {
		h.fail(w, err, http.StatusServiceUnavailable)
		return
	}
	kept := slices.DeleteFunc(entries, func(e RegistryEntry) bool { return !query.keeps(e) })
	page, next := query.page(kept)
	writeJSON(w, registryList{Servers: nonNil(page), Metadata: registryPage{NextCursor: next, Count: len(page)}})
}

func (h *handler) registryVersions(w http.ResponseWriter, r *http.Request) {
	entry, ok := h.registryEntry(w, r)
	if ok {
		writeJSON(w, registryList{Servers: []RegistryEntry{entry}, Metadata: registryPage{Count: 1}})
	}
}

func (h *handler) registryVersion(w http.ResponseWriter, r *http.Request) {
	entry, ok := h.registryEntry(w, r)
	if !ok {
		return
	}
	if v := r.PathValue("version"); v != "latest" && v != entry.Server.Version {
		h.fail(w, fmt.Errorf("server %s has no version %q; it serves %s", entry.Server.Name, v, entry.Server.Version), http.StatusNotFound)
		return
	}
	writeJSON(w, entry)
}

// registryEntry finds the server the path names among those the caller may see.
func (h *handler) registryEntry(w http.ResponseWriter, r *http.Request) (RegistryEntry, bool) {
	entries, err := h.catalog.RegistryEntries(r.Context(), viewerFrom(r.Context()))
	if err != nil {
		h.fail(w, err, http.StatusServiceUnavailable)
		return RegistryEntry{}, false
	}
	name := r.PathValue("name")
	i, found := slices.BinarySearchFunc(entries, name, func(e RegistryEntry, name string) int { return cmp.Compare(e.Server.Name, name) })
	if !found {
		h.fail(w, fmt.Errorf("no server %q that you may see (the slash in a name is %%2F in a path)", name), http.StatusNotFound)
		return RegistryEntry{}, false
	}
	return entries[i], true
}

// RegistryEntries lists, ordered by name, the servers who may see as registry entries.
func (c *Catalog) RegistryEntries(ctx context.Context, who Viewer) ([]RegistryEntry, error) {
	servers, err := c.skillServersSeenBy(ctx, who)
	if err != nil {
		return nil, err
	}
	digests, err := c.importSummaries(ctx)
	if err != nil {
		return nil, err
	}
	prefix := reverseDomain(cmp.Or(c.RegistryDomain, "cluster.local"))
	var out []RegistryEntry
	for _, ss := range servers {
		if entry, ok := registryEntryOf(ss, prefix, digests, who); ok {
			out = append(out, entry)
		}
	}
	slices.SortFunc(out, func(a, b RegistryEntry) int { return cmp.Compare(a.Server.Name, b.Server.Name) })
	return out, nil
}

// importSummary is what the registry tells of an import a server re-exports.
type importSummary struct {
	digest string
	eras   []string
}

// importSummaries maps "namespace/import" to the import's catalog digest and eras.
func (c *Catalog) importSummaries(ctx context.Context) (map[string]importSummary, error) {
	list := &cantusv1alpha1.RemoteToolImportList{}
	if err := c.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list RemoteToolImports: %w", err)
	}
	out := map[string]importSummary{}
	for _, imp := range list.Items {
		if imp.Status.CatalogDigest != "" {
			out[imp.Namespace+"/"+imp.Name] = importSummary{digest: imp.Status.CatalogDigest, eras: imp.Status.Eras}
		}
	}
	return out, nil
}

func registryEntryOf(ss *cantusv1alpha1.SkillServer, prefix string, digests map[string]importSummary, who Viewer) (RegistryEntry, bool) {
	name := RegistryName(prefix, ss.Namespace, ss.Name)
	if len(name) > maxServerNameLength || !remoteURL.MatchString(ss.Status.URL) {
		return RegistryEntry{}, false
	}
	server := RegistryServer{
		Schema:      ServerSchema,
		Name:        name,
		Title:       clip.Characters(ss.Spec.ServerInfo.Name, maxDescriptionLength),
		Description: registryDescription(ss),
		Version:     RegistryVersion(ss),
		Remotes:     []RegistryRemote{{Type: string(ss.Spec.TransportOrDefault()), URL: ss.Status.URL, Headers: authHeaders(ss)}},
	}
	return RegistryEntry{Server: server, Meta: RegistryMeta{
		Official: OfficialMeta{Status: "active", PublishedAt: ss.CreationTimestamp.UTC(), UpdatedAt: updatedAt(ss), IsLatest: true},
		Cluster:  clusterMeta(ss, digests, who),
	}}, true
}

// remoteURL is what server.json accepts as a remote's URL.
var remoteURL = regexp.MustCompile(`^https?://\S+$`)

func clusterMeta(ss *cantusv1alpha1.SkillServer, digests map[string]importSummary, who Viewer) SkillServerMeta {
	meta := SkillServerMeta{
		Namespace: ss.Namespace,
		Name:      ss.Name,
		Ready:     apimeta.IsStatusConditionTrue(ss.Status.Conditions, cantusv1alpha1.ConditionReady),
		Discovery: string(ss.Spec.Discovery.ModeOrDefault()),
	}
	for _, t := range ss.Status.Tools {
		if who.MayCall(ss, t.Name) {
			meta.Tools++
		}
	}
	for _, k := range ss.Status.AgentSkills {
		if who.MayUse(ss, access.ItemSkill, skillPath(k.URI)) {
			if meta.AgentSkills == nil {
				meta.AgentSkills = map[string]string{}
			}
			meta.AgentSkills[k.URI] = k.Digest
		}
	}
	if apimeta.IsStatusConditionTrue(ss.Status.Conditions, cantusv1alpha1.ConditionVerified) {
		meta.VerifiedConfigHash = ss.Status.ConfigHash
	}
	for _, imp := range ss.Spec.Imports {
		if d, ok := digests[ss.Namespace+"/"+imp.Name]; ok {
			if meta.ImportDigests == nil {
				meta.ImportDigests = map[string]string{}
			}
			meta.ImportDigests[imp.Name] = d.digest
			if len(d.eras) > 0 {
				if meta.ImportEras == nil {
					meta.ImportEras = map[string][]string{}
				}
				meta.ImportEras[imp.Name] = d.eras
			}
		}
	}
	return meta
}

// authHeaders tells a client that the server wants a bearer token.
func authHeaders(ss *cantusv1alpha1.SkillServer) []RegistryHeader {
	if ss.Spec.Auth == nil {
		return nil
	}
	return []RegistryHeader{{Name: "Authorization", Description: "Bearer <token> the server accepts", IsRequired: true, IsSecret: true}}
}

// RegistryName is a SkillServer's name in the registry: "<prefix>.<namespace>/<name>".
func RegistryName(prefix, namespace, name string) string {
	return prefix + "." + namespace + "/" + name
}

// reverseDomain turns cluster.local into local.cluster.
func reverseDomain(domain string) string {
	labels := strings.Split(strings.Trim(domain, "."), ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".")
}

// RegistryVersion is the server's version with, as semver build metadata, what
// identifies what it serves.
func RegistryVersion(ss *cantusv1alpha1.SkillServer) string {
	base := cmp.Or(ss.Spec.ServerInfo.Version, "0.0.0")
	build := "gen." + strconv.FormatInt(ss.Generation, 10)
	if hash := buildIdentifier(ss.Status.ConfigHash); hash != "" {
		build = "cfg." + hash
	}
	sep := "+"
	if strings.Contains(base, "+") {
		sep = "." // the version has build metadata already: extend it
	}
	return base + sep + build
}

// buildIdentifier keeps the characters semver allows in build metadata.
func buildIdentifier(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
			return r
		}
		return -1
	}, s)
}

// registryDescription is the first line of the server's instructions, or a sentence
// naming it, within the 100 characters server.json allows.
func registryDescription(ss *cantusv1alpha1.SkillServer) string {
	first, _, _ := strings.Cut(strings.TrimSpace(ss.Spec.ServerInfo.Instructions), "\n")
	if first = strings.TrimSpace(first); first != "" {
		return clip.Characters(first, maxDescriptionLength)
	}
	return clip.Characters("MCP server "+ss.Namespace+"/"+ss.Name+" run by cantus-operator", maxDescriptionLength)
}

// updatedAt is the newest of the creation time and the conditions' transition times.
func updatedAt(ss *cantusv1alpha1.SkillServer) time.Time {
	t := ss.CreationTimestamp.Time
	for _, c := range ss.Status.Conditions {
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return t.UTC()
}
