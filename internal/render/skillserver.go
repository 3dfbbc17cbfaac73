package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Inputs are what a SkillServer's config needs besides the object itself; the controller
// gathers them from the cluster before it renders.
type Inputs struct {
	// Imports holds the RemoteToolImports of the server's namespace by name; those the
	// spec names and that are absent are reported, not fatal.
	Imports map[string]*cantusv1alpha1.RemoteToolImport
	// Cluster is this cluster's service-account issuer with its keys (URL and JWKS) and
	// the bindings it revoked; its keys are read only when the server accepts
	// service-account tokens, its URL also when it accepts OIDC tokens.
	Cluster adapterconfig.Issuer
	// AuditPolicy names the ToolSourcePolicy in Audit mode when only such policies cover
	// the server's namespace: refusals new in this version then warn instead.
	AuditPolicy string
	// ReservedAudiences are the API server's audiences: a server may not accept tokens
	// issued for them (nor for another server's default audience).
	ReservedAudiences []string
	// Content is the server's agent skills, resources, resource templates and prompts,
	// rendered from its ConfigMaps by RenderContent.
	Content Content
	// ConnectEndpoint is the operator's token endpoint for gateways
	// (adapterconfig.ConnectTokenPath), which imports in connect mode use.
	ConnectEndpoint string
}

// Result is a SkillServer rendered: what the runtimes apply and what the status reports.
type Result struct {
	// Config is the adapter config; nil when the spec has problems found before rendering.
	Config *adapterconfig.Config
	// Files are the files the adapter reads (import headers and CA bundles, bearer
	// tokens, the OIDC CA bundle), projected from Secrets and ConfigMaps.
	Files []File
	// Hash identifies the whole config; RolloutHash only what the adapter cannot reload,
	// so that a change of it alone rolls the pods. Both are empty when Report.Invalid is set.
	Hash        string
	RolloutHash string
	// Authorization is the server's rules compiled, as its adapter applies them.
	Authorization Authorization
	Report        Report
}

// Report is what the status says about a rendering besides the config.
type Report struct {
	// Invalid says why the spec cannot be served; the server then keeps its last good
	// config, and the spec is terminal until it changes.
	Invalid error
	// NonPortableKeys lists the schema keys strict MCP clients are known to reject.
	NonPortableKeys []string
	// Imports says which imported tools are served and why the others are not.
	Imports Imports
	// ImportedContent says which imported prompts, resources and resource templates
	// are served and why the others are not.
	ImportedContent ContentReport
	// Groups says how OIDC groups meet the rules; nil without spec.auth.oidc.
	Groups *GroupsReport
	// Audiences names the refused service-account and OIDC audiences; nil without
	// spec.auth.serviceAccountTokens and spec.auth.oidc.
	Audiences *AudiencesReport
}

// Authorization is a server's compiled authorization rules.
type Authorization struct {
	rules *access.Rules
	err   error
}

// Allows says whether the rules let caller use the tool, prompt, resource or skill.
// Rules that do not compile allow nothing: the server is Stalled and its adapter keeps
// rules this caller cannot know.
func (a Authorization) Allows(caller *access.Caller, kind access.ItemKind, name string) bool {
	return a.err == nil && a.rules.AllowsKind(caller, kind, name)
}

// AllowsWithin is Allows spending the CEL work from budget; complete is false when the
// budget ran out before the rules could decide (the answer is then no, not to be kept).
func (a Authorization) AllowsWithin(caller *access.Caller, kind access.ItemKind, name string, budget *access.Budget) (allowed, complete bool) {
	if a.err != nil {
		return false, true
	}
	return a.rules.AllowsKindWithin(caller, kind, name, budget)
}

// Refuse is an Authorization that allows nothing, for a server that could not be rendered.
func Refuse(why error) Authorization { return Authorization{err: why} }

// SkillServer renders a SkillServer's adapter config and checks it, each part once: its
// own tools and rules once per generation (shared by every caller in the process, so the
// controller and the catalog do not compile them twice), and the imported tools once per
// call. The error is for what no spec can cause (an encoding failure); what is wrong with
// the spec is in Report.Invalid.
func SkillServer(ss *cantusv1alpha1.SkillServer, in Inputs) (Result, error) {
	own := ownPartOf(ss)
	out := Result{Authorization: own.authorization}
	if own.problems != nil {
		out.Report.Invalid = own.problems
		return out, nil
	}
	imported := reexport(ss, in.Imports, servedNames(own.config), in.ReservedAudiences...)
	auth := renderAuth(ss, in.Cluster, in.AuditPolicy, in.ReservedAudiences...)
	cfg := *own.config
	// Never nil: a config without tools says "tools": [], as it always did, so that its
	// hash does not change.
	cfg.Tools = append(make([]adapterconfig.Tool, 0, len(own.config.Tools)+len(imported.tools)), own.config.Tools...)
	cfg.Tools = append(cfg.Tools, imported.tools...)
	cfg.Withheld = imported.withheld
	cfg.BearerTokenFile, cfg.Auth = auth.BearerTokenFile, auth.Config
	limits, limitsErr := renderLimits(ss.Spec.Limits)
	cfg.Limits = limits
	cfg.Discovery = discoveryConfig(ss.Spec.Discovery)
	in.Content.Apply(&cfg, ContentMountPath)
	importedContent := reexportContent(ss, in.Imports, &cfg, in.ReservedAudiences...)
	setConnectEndpoint(&cfg, in.ConnectEndpoint)
	out.Config = &cfg
	out.Files = slices.Concat(imported.files, auth.Files, requestStateKeys(ss, &cfg))
	out.Report = Report{
		Invalid:         errors.Join(own.invalid, own.authorization.err, clusterIssuerAsOIDC(ss, in.Cluster, in.ReservedAudiences), validIssuers(auth.Config), validContent(&cfg), limitsErr, adapterconfig.ValidateDiscovery(&cfg)),
		NonPortableKeys: own.nonPortable,
		Imports:         imported.report,
		ImportedContent: importedContent,
		Groups:          auth.Groups,
		Audiences:       auth.Audiences,
	}
	if out.Report.Invalid != nil {
		return out, nil
	}
	var err error
	if out.Hash, err = hashOf(&cfg); err != nil {
		return Result{}, err
	}
	if out.RolloutHash, err = rolloutHashOf(&cfg); err != nil {
		return Result{}, err
	}
	return out, nil
}

// validIssuers checks the issuers alone: the rules are compiled once per generation.
func validIssuers(auth *adapterconfig.AuthConfig) error {
	if auth == nil {
		return nil
	}
	return access.ValidateAuth(&adapterconfig.AuthConfig{Issuers: auth.Issuers})
}

// servedNames are the names the server's own tools take; imports may not shadow them.
func servedNames(cfg *adapterconfig.Config) []string {
	names := make([]string, 0, len(cfg.Tools)+1)
	for _, t := range cfg.Tools {
		names = append(names, t.Name)
	}
	if cfg.Memory != nil {
		names = append(names, cfg.Memory.ToolName)
	}
	return names
}

// ownPart is what a SkillServer's spec alone decides: the same for every call within
// one generation.
type ownPart struct {
	generation int64
	// problems are the spec's own (Spec.Problems): nothing is rendered.
	problems error
	// config holds the server's own tools and memory, checked; shared, never changed.
	config        *adapterconfig.Config
	invalid       error
	nonPortable   []string
	authorization Authorization
}

// ownParts keeps each server's ownPart for its current generation.
var ownParts = struct {
	sync.Mutex
	byUID map[types.UID]*ownPart
}{}

// maxOwnParts bounds the memo; past it (deleted servers), it starts again.
const maxOwnParts = 8192

func ownPartOf(ss *cantusv1alpha1.SkillServer) *ownPart {
	if ss.UID == "" { // built in Go, not read from the API server: nothing names it
		return renderOwnPart(ss)
	}
	ownParts.Lock()
	defer ownParts.Unlock()
	if got, ok := ownParts.byUID[ss.UID]; ok && got.generation == ss.Generation {
		return got
	}
	if ownParts.byUID == nil || len(ownParts.byUID) >= maxOwnParts {
		ownParts.byUID = map[types.UID]*ownPart{}
	}
	part := renderOwnPart(ss)
	ownParts.byUID[ss.UID] = part
	return part
}

func renderOwnPart(ss *cantusv1alpha1.SkillServer) *ownPart {
	part := &ownPart{generation: ss.Generation, authorization: compileAuthorization(ss.Spec.Authorization)}
	if problems := ss.Spec.Problems(); len(problems) > 0 {
		part.problems = errors.New(strings.Join(problems, "; "))
		return part
	}
	part.config = adapterConfig(ss)
	part.nonPortable = nonPortableKeys(ss.Spec.Skills)
	counters.specValidations.Add(1)
	part.invalid = adapterconfig.Validate(part.config)
	return part
}

func compileAuthorization(spec *cantusv1alpha1.AuthorizationSpec) Authorization {
	rules := authorization(spec)
	if rules == nil {
		return Authorization{}
	}
	counters.ruleCompilations.Add(1)
	compiled, err := access.CompileRules(rules)
	if err != nil {
		err = fmt.Errorf("spec.authorization: %w", err)
	}
	return Authorization{rules: compiled, err: err}
}

// checkImportedTool checks one imported tool as the adapter would compile it.
func checkImportedTool(t *adapterconfig.Tool) error {
	counters.importedToolChecks.Add(1)
	return adapterconfig.CheckTool(t)
}

// Counts are how often render did its costly work since the process started. They
// prove what SkillServer promises: the spec's schemas are validated and its rules
// compiled once per generation, each imported tool once per call.
type Counts struct {
	SpecValidations    int64
	RuleCompilations   int64
	ImportedToolChecks int64
}

var counters struct {
	specValidations, ruleCompilations, importedToolChecks atomic.Int64
}

// CountsSoFar returns the counts at this moment.
func CountsSoFar() Counts {
	return Counts{
		SpecValidations:    counters.specValidations.Load(),
		RuleCompilations:   counters.ruleCompilations.Load(),
		ImportedToolChecks: counters.importedToolChecks.Load(),
	}
}
