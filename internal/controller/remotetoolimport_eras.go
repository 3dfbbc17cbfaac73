package controller

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A dual-era remote may list other tools to a client of 2026-07-28 than to one of
// 2025-11-25 (tools that ask for input with input-required results exist only in the
// newer era), and may define a tool differently in each. The import serves the union:
// each tool once, by name, with the eras it is listed in, its definition of 2025-11-25
// where it has one (as before eras were recorded, so no digest changes for a remote
// that defines its tools alike in both) and, where the other era's definition differs,
// that one too. Both are digested, so one definitions digest approves both eras.

// statusEras are the eras a successful probe found the remote serving, as
// status.eras shows them: the ones mcpclient speaks, newest first.
func statusEras(res *mcpclient.Result) []string {
	var out []string
	for _, era := range mcpclient.Eras() {
		if slices.Contains(res.Eras, era) {
			out = append(out, era)
		}
	}
	return out
}

// A tool's definition of another era is bounded in status as the members of its main
// definition are; past the limit it is left out (named in clipped), and gateways do
// not serve the tool in that era.
// maxEraDefinitionBytes bounds one; maxEraDefinitionsBytes all of an import's.
const (
	maxEraDefinitionBytes  = 64 << 10
	maxEraDefinitionsBytes = 128 << 10
)

// eraCatalog is what a probe found in every era, merged by tool name.
type eraCatalog struct {
	// tools are the union: the definition of 2025-11-25 where the remote lists the
	// tool there, else that of 2026-07-28; in the order of the 2025-11-25 listing,
	// then the tools of 2026-07-28 only in theirs.
	tools []mcpclient.Tool
	// eras are the eras each tool is listed in, newest first, by name.
	eras map[string][]string
	// other are the definitions in 2026-07-28 that differ from the one in tools.
	other map[string]mcpclient.Tool
	// needs are the client capabilities each tool needs to be listed (the probe's
	// RequiredCapabilities).
	needs map[string][]string
}

// catalogOf merges res's listings of each era.
func catalogOf(res *mcpclient.Result) eraCatalog {
	c := eraCatalog{eras: map[string][]string{}, other: map[string]mcpclient.Tool{}, needs: res.RequiredCapabilities}
	legacy := res.Serves(mcpclient.EraLegacy) || len(res.Eras) == 0
	modern := res.Serves(mcpclient.EraModern)
	if legacy {
		c.tools = slices.Clone(res.Tools)
	}
	modernTools := res.ModernTools
	if modern && !legacy && len(modernTools) == 0 {
		modernTools = res.Tools
	}
	inModern := map[string]mcpclient.Tool{}
	for _, t := range modernTools {
		inModern[t.Name] = t
	}
	for _, t := range c.tools {
		if m, ok := inModern[t.Name]; ok {
			c.eras[t.Name] = []string{mcpclient.EraModern, mcpclient.EraLegacy}
			if m.Digest() != t.Digest() || mcpclient.Digest([]mcpclient.Tool{m}) != mcpclient.Digest([]mcpclient.Tool{t}) {
				c.other[t.Name] = m
			}
			continue
		}
		c.eras[t.Name] = []string{mcpclient.EraLegacy}
	}
	for _, t := range modernTools {
		if _, seen := c.eras[t.Name]; !seen {
			c.tools = append(c.tools, t)
			c.eras[t.Name] = []string{mcpclient.EraModern}
		}
	}
	return c
}

// filtered keeps the tools spec.tools selects.
func (c eraCatalog) filtered(f *cantusv1alpha1.ToolFilter) eraCatalog {
	c.tools = filterTools(c.tools, f)
	return c
}

// coverEras makes base, the catalog digest of the tools' (main) definitions and the
// content, cover the definitions tools have in 2026-07-28 where those differ; base
// itself when none does, so that no digest changes for a remote that defines its tools
// alike in both eras.
func (c eraCatalog) coverEras(base string) string {
	var others []mcpclient.Tool
	for _, t := range c.tools {
		if o, ok := c.other[t.Name]; ok {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return base
	}
	return definition.Sum([]any{base, []string{mcpclient.EraModern, mcpclient.Digest(others)}})
}

// record adds what the catalog knows to the status setHandshakeSucceeded and
// setContentDiscovered wrote: the catalog digest over every era, and each tool's
// eras, definition in the other era and needs.
func (c eraCatalog) record(imp *cantusv1alpha1.RemoteToolImport) {
	imp.Status.CatalogDigest = c.coverEras(imp.Status.CatalogDigest)
	c.annotate(imp.Status.Tools, imp.Status.Eras)
}

// annotate records on the status tools the eras each is listed in (when the remote
// serves more than one), its definition in the other era where that differs, and the
// capabilities it needs.
func (c eraCatalog) annotate(tools []cantusv1alpha1.DiscoveredTool, servedEras []string) {
	size := 0
	for i := range tools {
		d := &tools[i]
		d.Eras, d.EraDefinitions, d.RequiresCapabilities = nil, nil, nil
		if len(servedEras) > 1 {
			d.Eras = c.eras[d.Name]
		}
		if o, ok := c.other[d.Name]; ok {
			def := cantusv1alpha1.EraDefinition{Era: mcpclient.EraModern, Digest: o.Digest()}
			if len(o.Raw) <= maxEraDefinitionBytes && size+len(o.Raw) <= maxEraDefinitionsBytes {
				size += len(o.Raw)
				def.Definition = &runtime.RawExtension{Raw: o.Raw}
			} else {
				d.Clipped = append(d.Clipped, "eraDefinitions")
			}
			d.EraDefinitions = []cantusv1alpha1.EraDefinition{def}
		}
		if needs := c.needs[d.Name]; len(needs) > 0 {
			d.RequiresCapabilities = slices.Clone(needs[:min(len(needs), 3)])
		}
	}
}
