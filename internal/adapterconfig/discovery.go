package adapterconfig

import (
	"errors"
	"fmt"
	"path"
	"slices"
)

// DiscoverySearch is the one discovery mode a config names: without Discovery, every
// tool is listed.
const DiscoverySearch = "Search"

// MaxDiscoveryLimit bounds how many tools one search answers, whatever the config says.
const MaxDiscoveryLimit = 100

// Discovery is progressive discovery (spec.discovery in Search mode): tools/list
// answers the pinned tools and the two meta-tools; the adapter indexes every served
// tool and agent skill at (re)load and answers searches from that index, filtered by
// the caller's rules.
type Discovery struct {
	Mode string `json:"mode"`
	// Pinned are globs (path.Match) of the tool names listed besides the meta-tools.
	Pinned []string `json:"pinned,omitempty"`
	// FindToolName and CallToolName name the meta-tools.
	FindToolName string `json:"findToolName"`
	CallToolName string `json:"callToolName"`
	// DefaultLimit tools answer a search that names no limit; never more than MaxLimit.
	DefaultLimit int `json:"defaultLimit"`
	MaxLimit     int `json:"maxLimit"`
}

// Searching says whether cfg serves in Search mode.
func (cfg *Config) Searching() bool {
	return cfg.Discovery != nil && cfg.Discovery.Mode == DiscoverySearch
}

// Pins says whether the tool name is listed in Search mode besides the meta-tools.
func (d *Discovery) Pins(name string) bool {
	return slices.ContainsFunc(d.Pinned, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	})
}

// IsMetaTool says whether name is one of the meta-tools.
func (d *Discovery) IsMetaTool(name string) bool {
	return d != nil && (name == d.FindToolName || name == d.CallToolName)
}

// ValidateDiscovery checks cfg.Discovery and that no served tool (declared, imported,
// the memory tool, or one withheld for approval) takes a meta-tool's name: the
// meta-tool would hide it, so the config is refused, naming both.
func ValidateDiscovery(cfg *Config) error {
	d := cfg.Discovery
	if d == nil {
		return nil
	}
	var errs []error
	if d.Mode != DiscoverySearch {
		errs = append(errs, fmt.Errorf("discovery: mode %q is not supported: use %q (or leave discovery out to list every tool)", d.Mode, DiscoverySearch))
	}
	for field, name := range map[string]string{"findToolName": d.FindToolName, "callToolName": d.CallToolName} {
		if err := checkMetaToolName(name); err != nil {
			errs = append(errs, fmt.Errorf("discovery.%s: %w", field, err))
		}
	}
	if d.FindToolName == d.CallToolName {
		errs = append(errs, fmt.Errorf("discovery: findToolName and callToolName are both %q: the meta-tools need names of their own", d.FindToolName))
	}
	if d.DefaultLimit < 1 || d.MaxLimit < d.DefaultLimit || d.MaxLimit > MaxDiscoveryLimit {
		errs = append(errs, fmt.Errorf("discovery: limits default %d and max %d must satisfy 1 <= default <= max <= %d", d.DefaultLimit, d.MaxLimit, MaxDiscoveryLimit))
	}
	for _, g := range d.Pinned {
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("discovery.pinned: %q is not a glob: %w", g, err))
		}
	}
	errs = append(errs, metaToolConflicts(cfg)...)
	return errors.Join(errs...)
}

func checkMetaToolName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("%q must be 1 to 128 characters", name)
	}
	for _, c := range name {
		if ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'; !ok {
			return fmt.Errorf("%q may use only A-Z, a-z, 0-9, '_', '-' and '.' (MCP tool-name rules)", name)
		}
	}
	return nil
}

// metaToolConflicts names each served tool that takes a meta-tool's name.
func metaToolConflicts(cfg *Config) []error {
	d := cfg.Discovery
	var errs []error
	conflict := func(name, what string) {
		meta := "findToolName"
		if name == d.CallToolName {
			meta = "callToolName"
		}
		errs = append(errs, fmt.Errorf("%s %q has the name of the discovery meta-tool %q (spec.discovery.%s): rename the tool, or give the meta-tool another name", what, name, name, meta))
	}
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		if !d.IsMetaTool(t.Name) {
			continue
		}
		what := "tool"
		if t.Remote != nil {
			what = fmt.Sprintf("tool imported from %s as", t.Remote.Import)
		}
		conflict(t.Name, what)
	}
	for _, w := range cfg.Withheld {
		if d.IsMetaTool(w.Name) {
			conflict(w.Name, "imported tool (withheld for approval)")
		}
	}
	if cfg.Memory != nil && d.IsMetaTool(cfg.Memory.ToolName) {
		conflict(cfg.Memory.ToolName, "memory tool")
	}
	return errs
}
