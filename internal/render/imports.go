package render

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
)

// ImportFilesDir is where the adapter reads the header values and CA bundles of the
// imports it re-exports, and under _auth/ its bearer tokens and OIDC CA bundle; the
// kubernetes runtime projects them from Secrets and ConfigMaps.
const ImportFilesDir = "/var/run/cantus/imports"

// DefaultRemoteCallTimeout bounds one re-exported call when the import sets no timeout.
const DefaultRemoteCallTimeout = 30 * time.Second

// File is a file the adapter reads, projected from one key of a Secret or ConfigMap in the
// SkillServer's namespace. The rendered config names only its path, never its content.
type File struct {
	Path      string
	Secret    string
	ConfigMap string
	Key       string
	// AllKeys makes Path a directory holding every key of Secret, one file each, kept
	// up to date as keys come and go (Key is unused).
	AllKeys bool
	// ServiceAccountTokenAudience, when set, makes Path hold a token of the pod's own
	// service account issued for this audience, renewed before it expires (Secret,
	// ConfigMap and Key are unused).
	ServiceAccountTokenAudience string
}

// reexported is what re-exporting the imports adds to a SkillServer's config.
type reexported struct {
	// tools are served besides the skills, in spec.imports order.
	tools []adapterconfig.Tool
	// files are the header values and CA bundles the tools need.
	files []File
	// withheld are the imported tools whose definitions wait for approval.
	withheld []adapterconfig.WithheldTool
	report   Imports
}

// Imports reports what became of the imports a SkillServer re-exports.
type Imports struct {
	// Served says where each imported tool comes from.
	Served []cantusv1alpha1.ServedTool
	// Unresolved names the imports that are not served and why.
	Unresolved []string
	// Collisions names the imported tools left out because their name was taken.
	Collisions []string
	// Skipped names the imported tools left out because the adapter cannot serve them as
	// the remote defined them (a name outside the MCP grammar, a schema that is not an
	// object schema or is too costly to validate); the rest are served.
	Skipped []string
	// Withheld names the imported tools not served because their new or changed
	// definitions wait for approval at their import (spec.approval.mode Manual).
	Withheld []string
	// RenamedAppTools names the served tools that open an MCP App view and are served
	// under another name than their remote's: the view's own calls use the remote's.
	RenamedAppTools []string
	// NotRelayed names the imported tools left out because their remote lists them
	// only to clients declaring capabilities (elicitation, sampling, roots) that
	// spec.imports[].relay does not relay: the remote would ask their callers for
	// what the gateway does not pass on.
	NotRelayed []string
	// CallerCredentials is true when an import the server names has
	// spec.callerCredentials; CallerCredentialsRefused names those not served because
	// the server cannot act for its callers there.
	CallerCredentials        bool
	CallerCredentialsRefused []CallerCredentialsRefusal
	// PerCallerSecret names the served imports whose callers' keys come from per-caller
	// Secrets: the operator gathers them into CallerKeysSecretName.
	PerCallerSecret []string
	// Connect names the served imports in connect mode: the operator publishes its
	// serving CA in CallerKeysSecretName (key ConnectCAKey) for them.
	Connect []string
}

// reexport re-exports the tools of the imports in spec.imports. imports holds the
// RemoteToolImports of the namespace by name (absent ones are reported). taken are the
// names already served (skills, memory): an imported tool never shadows one of them, and
// two imported tools never shadow each other; both are reported instead. reserved are
// the API server's audiences, which no actor token may be issued for.
func reexport(ss *cantusv1alpha1.SkillServer, imports map[string]*cantusv1alpha1.RemoteToolImport, taken []string, reserved ...string) reexported {
	var out reexported
	owner := map[string]string{}
	for _, name := range taken {
		owner[name] = "a skill of this server"
	}
	candidates := map[string][]candidate{}
	var order []string
	var pending []adapterconfig.WithheldTool
	for _, spec := range ss.Spec.Imports {
		imp, why := readyImport(imports, spec.Name)
		if imp, ok := imports[spec.Name]; ok && imp.Spec.CallerCredentials != nil {
			out.report.CallerCredentials = true
		}
		if why == "" {
			why = out.refuseCallerCredentials(ss, imp, reserved)
		}
		if why != "" {
			out.report.Unresolved = append(out.report.Unresolved, fmt.Sprintf("%s (%s)", spec.Name, why))
			continue
		}
		backend, files := remoteBackend(imp)
		backend.Relay = relayed(spec, imp)
		out.files = append(out.files, files...)
		if cc := imp.Spec.CallerCredentials; cc != nil && cc.PerCallerSecret != nil {
			out.perCallerSecret(ss, spec.Name)
		}
		if cc := imp.Spec.CallerCredentials; cc != nil && cc.Connect != nil {
			out.connect(ss, spec.Name)
		}
		for _, t := range imp.Status.Tools {
			if !selected(spec, t.Name) {
				continue
			}
			served := servedName(spec, t.Name)
			if missing := unrelayedNeeds(t.RequiresCapabilities, backend.Relay); len(missing) > 0 {
				out.report.NotRelayed = append(out.report.NotRelayed, fmt.Sprintf("%q from import %s (needs %s)",
					adapterconfig.ClipName(served), spec.Name, strings.Join(missing, ", ")))
				continue
			}
			if t.Approval == cantusv1alpha1.ItemPending {
				pending = append(pending, withheldTool(served, imp, t.Name))
				continue
			}
			if t.Approval == cantusv1alpha1.ItemApproved && len(t.Clipped) > 0 {
				// The status holds a shortened definition, which nobody approved: an
				// approved tool is served whole or not at all.
				out.report.Skipped = append(out.report.Skipped, fmt.Sprintf("%q from import %s: its approved definition is served only whole, and the import's status clipped its %s",
					adapterconfig.ClipName(served), spec.Name, strings.Join(t.Clipped, ", ")))
				continue
			}
			if _, seen := candidates[served]; !seen {
				order = append(order, served)
			}
			candidates[served] = append(candidates[served], candidate{spec: spec, tool: t, backend: backend})
		}
	}
	for _, name := range order {
		cands := candidates[name]
		if who, ok := owner[name]; ok || len(cands) > 1 {
			out.report.Collisions = append(out.report.Collisions, describeCollision(name, who, cands))
			continue
		}
		c := cands[0]
		tool := c.adapterTool(name)
		if err := checkImportedTool(&tool); err != nil {
			out.report.Skipped = append(out.report.Skipped, fmt.Sprintf("%q from import %s: %v", adapterconfig.ClipName(name), c.spec.Name, err))
			continue
		}
		out.tools = append(out.tools, tool)
		served := cantusv1alpha1.ServedTool{Name: name, Source: "import:" + c.spec.Name}
		if name != c.tool.Name {
			served.RemoteName = c.tool.Name
			if view := appView(c.tool); view != "" {
				out.report.RenamedAppTools = append(out.report.RenamedAppTools,
					fmt.Sprintf("%q (remote %q of import %s, view %s)", adapterconfig.ClipName(name), adapterconfig.ClipName(c.tool.Name), c.spec.Name, adapterconfig.ClipName(view)))
			}
		}
		out.report.Served = append(out.report.Served, served)
	}
	out.withhold(pending, owner, candidates)
	return out
}

// refuseCallerCredentials records why the server cannot serve imp for its callers, if
// it cannot, and returns it for the unresolved import's note.
func (out *reexported) refuseCallerCredentials(ss *cantusv1alpha1.SkillServer, imp *cantusv1alpha1.RemoteToolImport, reserved []string) string {
	reason, message := refuseCallerCredentials(ss, imp, reserved)
	if reason == "" {
		return ""
	}
	out.report.CallerCredentialsRefused = append(out.report.CallerCredentialsRefused,
		CallerCredentialsRefusal{Import: imp.Name, Reason: reason, Message: message})
	return "its callerCredentials cannot be used by this server: " + reason
}

// perCallerSecret mounts the server's caller-keys Secret, once, for the imports whose
// callers' keys it gathers.
func (out *reexported) perCallerSecret(ss *cantusv1alpha1.SkillServer, importName string) {
	if len(out.report.PerCallerSecret) == 0 && len(out.report.Connect) == 0 {
		out.files = append(out.files, File{Path: CallerKeysDir, Secret: CallerKeysSecretName(ss.Name), AllKeys: true})
	}
	if !slices.Contains(out.report.PerCallerSecret, importName) {
		out.report.PerCallerSecret = append(out.report.PerCallerSecret, importName)
	}
}

// withhold adds the pending tools whose served name nothing else uses: a call to one
// is then answered definition_changed instead of "tool not found".
func (out *reexported) withhold(pending []adapterconfig.WithheldTool, owner map[string]string, candidates map[string][]candidate) {
	seen := map[string]bool{}
	for _, w := range pending {
		if _, taken := owner[w.Name]; taken || len(candidates[w.Name]) > 0 || seen[w.Name] {
			continue
		}
		seen[w.Name] = true
		out.withheld = append(out.withheld, w)
		out.report.Withheld = append(out.report.Withheld, adapterconfig.ClipName(w.Name))
	}
}

// withheldTool is how a gateway answers a call to a tool whose new or changed
// definition waits for approval at its import.
func withheldTool(served string, imp *cantusv1alpha1.RemoteToolImport, remote string) adapterconfig.WithheldTool {
	return adapterconfig.WithheldTool{Name: served, Reason: fmt.Sprintf(
		"definition_changed: the definition of tool %q changed at its source (RemoteToolImport %s/%s, remote tool %q) and is withheld until the import's owner approves it (status.approval.pendingDigest); list the tools again to see the approved ones",
		adapterconfig.ClipName(served), imp.Namespace, imp.Name, adapterconfig.ClipName(remote))}
}

type candidate struct {
	spec    cantusv1alpha1.SkillImport
	tool    cantusv1alpha1.DiscoveredTool
	backend adapterconfig.RemoteBackend
}

func (c candidate) adapterTool(served string) adapterconfig.Tool {
	backend := c.backend
	backend.RemoteName = c.tool.Name
	t := adapterconfig.Tool{Name: served, Description: c.tool.Description, InputSchema: emptyObjectSchema, Remote: &backend}
	if c.tool.InputSchema != nil && len(c.tool.InputSchema.Raw) > 0 {
		t.InputSchema = c.tool.InputSchema.Raw
	}
	backend.Definition = remoteDefinition(c.tool, t.InputSchema)
	backend.Eras, backend.ModernDefinition = toolEras(c.tool, backend.RemoteEras)
	backend.Needs = c.tool.RequiresCapabilities
	return t
}

// unrelayedNeeds are the capabilities of needs that relay lacks.
func unrelayedNeeds(needs, relay []string) []string {
	var missing []string
	for _, c := range needs {
		if !slices.Contains(relay, c) {
			missing = append(missing, c)
		}
	}
	return missing
}

// remoteDefinition rebuilds the remote's definition of d (without its name) from the
// members the import's status records, for the gateway to serve as the remote defined
// it. inputSchema is the one the gateway validates with. An approved tool (Manual mode)
// is served with the members its digest covers and no other (approvedMembers).
func remoteDefinition(d cantusv1alpha1.DiscoveredTool, inputSchema json.RawMessage) json.RawMessage {
	members := map[string]json.RawMessage{}
	if d.OtherFields != nil {
		_ = json.Unmarshal(d.OtherFields.Raw, &members) // the status holds an object; anything else adds nothing
		delete(members, "name")
	}
	if d.Approval == cantusv1alpha1.ItemApproved {
		members = approvedMembers(definition.ToolKind, members)
	}
	setString := func(name, value string) {
		if value != "" {
			members[name], _ = json.Marshal(value)
		}
	}
	setRaw := func(name string, value *runtime.RawExtension) {
		if value != nil && len(value.Raw) > 0 {
			members[name] = value.Raw
		}
	}
	setString("title", d.Title)
	setString("description", d.Description)
	members["inputSchema"] = inputSchema
	setRaw("outputSchema", d.OutputSchema)
	setRaw("annotations", d.Annotations)
	out, err := json.Marshal(members)
	if err != nil {
		return nil // a member that is not JSON: serve the tool without the remote's extras
	}
	return out
}

// approvedMembers are the members of an approved item's definition that its kind
// digests: what is served of an approved item is what was approved, so a member no
// digest covers (one the operator does not know yet, a resource's size) is dropped.
func approvedMembers(kind definition.ItemKind, members map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(members))
	for _, m := range kind.Members {
		if v, ok := members[m]; ok {
			out[m] = v
		}
	}
	return out
}

// approvedContentKinds are the kinds of content by the label definitionOf is given.
var approvedContentKinds = map[string]definition.ItemKind{
	definition.PromptKind.Name: definition.PromptKind, definition.ResourceKind.Name: definition.ResourceKind,
	definition.ResourceTemplateKind.Name: definition.ResourceTemplateKind, definition.SkillKind.Name: definition.SkillKind,
}

// approvedDefinition is what a gateway serves of an approved prompt, resource, resource
// template or skill (label its kind's name): exactly the members its digest covers, as
// their canonical JSON (definition.ItemKind.Served), so that one digest is served as one
// definition. A definition that is not an object is served as is (the adapter's check
// refuses it).
func approvedDefinition(label string, def json.RawMessage) json.RawMessage {
	kind, ok := approvedContentKinds[label]
	if !ok {
		panic("render: no item kind for " + label)
	}
	served, err := kind.Served(def)
	if err != nil {
		return def
	}
	return served
}

func describeCollision(name, owner string, cands []candidate) string {
	var from []string
	if owner != "" {
		from = append(from, owner)
	}
	for _, c := range cands {
		from = append(from, fmt.Sprintf("import %s (remote tool %s)", c.spec.Name, c.tool.Name))
	}
	return fmt.Sprintf("%q from %s", name, strings.Join(from, " and "))
}

// readyImport returns the import when it can be served, or why not.
func readyImport(imports map[string]*cantusv1alpha1.RemoteToolImport, name string) (*cantusv1alpha1.RemoteToolImport, string) {
	imp, ok := imports[name]
	switch {
	case !ok:
		return nil, "no RemoteToolImport of that name in this namespace"
	case imp.Status.ObservedGeneration != imp.Generation:
		return nil, "its spec changed and the operator has not checked it again yet"
	case !conditionTrue(imp, cantusv1alpha1.ConditionSourceAllowed):
		return nil, "its source is not allowed by a ToolSourcePolicy"
	case !conditionTrue(imp, cantusv1alpha1.ConditionReady):
		return nil, "not Ready: " + conditionReason(imp, cantusv1alpha1.ConditionReady)
	case imp.Status.ToolsTruncated:
		return nil, "its status lists tools without input schemas (truncated), so they cannot be served faithfully"
	}
	return imp, ""
}

func conditionTrue(imp *cantusv1alpha1.RemoteToolImport, t string) bool {
	c := meta.FindStatusCondition(imp.Status.Conditions, t)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == imp.Generation
}

func conditionReason(imp *cantusv1alpha1.RemoteToolImport, t string) string {
	if c := meta.FindStatusCondition(imp.Status.Conditions, t); c != nil {
		return c.Reason
	}
	return "no status yet"
}

// relayed is what the import lets the remote ask the callers of its tools. A stdio
// import gets nothing relayed: its bridge shares one child process among all callers,
// so a request the child sends cannot be tied to the call it serves.
func relayed(spec cantusv1alpha1.SkillImport, imp *cantusv1alpha1.RemoteToolImport) []string {
	if imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio || len(spec.Relay) == 0 {
		return nil
	}
	out := make([]string, 0, len(spec.Relay))
	for _, kind := range spec.Relay {
		out = append(out, string(kind))
	}
	slices.Sort(out)
	return out
}

// passesListChanges says whether a gateway passes the import's list_changed
// notifications on at once: not when its changes wait for approval (Manual), whose
// lists change only when approved, and not through a stdio bridge, which does not
// pass them on, nor with callers' credentials, where the gateway has no account of
// its own to listen with.
func passesListChanges(imp *cantusv1alpha1.RemoteToolImport) bool {
	return imp.Spec.Approval.ModeOrDefault() != cantusv1alpha1.ApprovalManual &&
		imp.Spec.Transport != cantusv1alpha1.ImportTransportStdio && imp.Spec.CallerCredentials == nil
}

// remoteBackend is how the adapter reaches the import: the same URL (or stdio bridge),
// headers and CA bundle the operator's handshake used.
func remoteBackend(imp *cantusv1alpha1.RemoteToolImport) (adapterconfig.RemoteBackend, []File) {
	b := adapterconfig.RemoteBackend{
		Import:    imp.Namespace + "/" + imp.Name,
		URL:       imp.Spec.URL,
		Transport: string(imp.Spec.Transport),
		Timeout:   adapterconfig.Duration{Duration: DefaultRemoteCallTimeout},
		Eras:      erasOf(imp),
	}
	b.RemoteEras = b.Eras
	b.Extensions = extensionsOf(imp)
	b.ListChanges = passesListChanges(imp)
	if imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio {
		b.URL, b.Transport = imp.Status.BridgeURL, string(cantusv1alpha1.ImportTransportStreamableHTTP)
	} else {
		// Calls connect only where the operator's policy check connected.
		b.Addresses = imp.Status.Addresses
	}
	dir := path.Join(ImportFilesDir, imp.Name)
	var files []File
	stdio := imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio
	for i, h := range imp.Spec.Headers {
		if stdio && strings.EqualFold(h.Name, bridgeAuthorizationHeader) {
			continue // the bridge's own token goes there
		}
		f := File{Path: path.Join(dir, fmt.Sprintf("header-%d", i)), Secret: h.ValueFrom.Name, Key: h.ValueFrom.KeyOrDefault()}
		if b.HeaderFiles == nil {
			b.HeaderFiles = map[string]string{}
		}
		b.HeaderFiles[h.Name] = f.Path
		files = append(files, f)
	}
	if stdio {
		// The bridge admits only callers with its token, read from its Secret like any
		// header an import reads from a Secret.
		f := File{Path: path.Join(dir, "bridge-authorization"), Secret: BridgeName(imp.Name), Key: BridgeAuthorizationKey}
		if b.HeaderFiles == nil {
			b.HeaderFiles = map[string]string{}
		}
		b.HeaderFiles[bridgeAuthorizationHeader] = f.Path
		files = append(files, f)
	}
	cc, ccFiles := callerCredentials(imp, dir)
	b.CallerCredentials = cc
	files = append(files, ccFiles...)
	if imp.Spec.TLS != nil && imp.Spec.TLS.CABundle != nil {
		f := File{Path: path.Join(dir, "ca.crt")}
		if ref := imp.Spec.TLS.CABundle.SecretRef; ref != nil {
			f.Secret, f.Key = ref.Name, ref.KeyOrDefault()
		} else if ref := imp.Spec.TLS.CABundle.ConfigMapRef; ref != nil {
			f.ConfigMap, f.Key = ref.Name, ref.KeyOrDefault()
		}
		b.CAFile = f.Path
		files = append(files, f)
	}
	return b, files
}

func selected(spec cantusv1alpha1.SkillImport, name string) bool {
	return GlobSelected(spec.Include, spec.Exclude, name)
}

// GlobSelected reports whether name matches an include glob (any name when there are
// none) and no exclude glob. Globs are path.Match patterns; tool names hold no '/'.
func GlobSelected(include, exclude []string, name string) bool {
	return (len(include) == 0 || matchesAny(include, name)) && !matchesAny(exclude, name)
}

func matchesAny(globs []string, name string) bool {
	return slices.ContainsFunc(globs, func(g string) bool {
		ok, err := path.Match(g, name)
		return err == nil && ok
	})
}

func servedName(spec cantusv1alpha1.SkillImport, remote string) string {
	for _, r := range spec.Renames {
		if r.From == remote {
			return r.To
		}
	}
	return spec.Prefix + remote
}

// rolloutHashOf identifies what the adapter pods cannot pick up without a restart. The
// imported tool lists are left out: the adapter reloads them from its config file and
// tells connected sessions with notifications/tools/list_changed, so a change of a
// remote's tools does not roll the pods. So is auth: rotated issuer keys and changed
// rules apply to the next request.
func rolloutHashOf(cfg *adapterconfig.Config) (string, error) {
	stable := *cfg
	stable.Auth = nil
	stable.Tools = nil
	stable.Withheld = nil // reloaded in place, like the imported tools
	stable.Replicas = 0   // scaling does not roll the pods: the adapter applies it in place
	withoutContent(&stable)
	endpoints := map[string]bool{}
	for _, t := range cfg.Tools {
		if t.Remote == nil {
			stable.Tools = append(stable.Tools, t)
			continue
		}
		endpoints[t.Remote.URL+" "+t.Remote.CAFile+" "+fmt.Sprint(sortedHeaderFiles(t.Remote.HeaderFiles))] = true
	}
	for _, e := range importedEndpoints(cfg) {
		endpoints[e] = true
	}
	keys := make([]string, 0, len(endpoints))
	for k := range endpoints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		stable.Tools = append(stable.Tools, adapterconfig.Tool{Name: "remote-endpoint", Description: k})
	}
	return hashOf(&stable)
}

func sortedHeaderFiles(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
