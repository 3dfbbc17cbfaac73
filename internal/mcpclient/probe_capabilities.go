package mcpclient

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
)

// A server may list a tool only to clients that declare a capability it will use
// (server-everything lists trigger-elicitation-request only to a client declaring
// elicitation). A gateway that would not relay that capability to its callers must not
// list the tool: its callers could not call it. So the probe, which declares every
// capability a gateway can relay (Options.Capabilities), lists the tools again
// declaring none and, when that lists fewer, declaring each capability alone, and
// records what each of the missing tools needs (Result.RequiredCapabilities).

// lister lists the tools a client declaring caps gets.
type lister func(ctx context.Context, caps []string) ([]Tool, error)

// toolNeeds maps each tool of full that a client declaring none of caps is not listed
// to the one capability of caps whose declaration lists it, or to all of caps when no
// single one does. Nil when caps is empty or every tool is listed without them.
func toolNeeds(ctx context.Context, full []Tool, caps []string, list lister) (map[string][]string, error) {
	if len(caps) == 0 || len(full) == 0 {
		return nil, nil
	}
	base, err := list(ctx, nil)
	if err != nil {
		return nil, err
	}
	extra := unlisted(full, base)
	if len(extra) == 0 {
		return nil, nil
	}
	needs := make(map[string][]string, len(extra))
	for _, c := range caps {
		got, err := list(ctx, []string{c})
		if err != nil {
			return nil, err
		}
		listed := toolNames(got)
		for _, name := range extra {
			if needs[name] == nil && listed[name] {
				needs[name] = []string{c}
			}
		}
	}
	all := slices.Sorted(slices.Values(caps))
	for _, name := range extra {
		if needs[name] == nil {
			needs[name] = all
		}
	}
	return needs, nil
}

// unlisted are the names of the tools of full that listed lacks, in full's order.
func unlisted(full, listed []Tool) []string {
	has := toolNames(listed)
	var out []string
	for _, t := range full {
		if !has[t.Name] {
			out = append(out, t.Name)
		}
	}
	return out
}

func toolNames(tools []Tool) map[string]bool {
	out := make(map[string]bool, len(tools))
	for _, t := range tools {
		out[t.Name] = true
	}
	return out
}

// legacyLister lists the tools on a session of its own, initialized declaring caps.
func legacyLister(c *Client, limit int) lister {
	return func(ctx context.Context, caps []string) ([]Tool, error) {
		s, err := c.ConnectDeclaring(ctx, caps)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		return s.ListTools(ctx, limit)
	}
}

// modernLister lists the tools in protocol 2026-07-28, the request declaring caps.
func modernLister(c *Client, limit int) lister {
	return func(ctx context.Context, caps []string) ([]Tool, error) {
		declared, err := json.Marshal(InitializeParams("", "", caps...)["capabilities"])
		if err != nil {
			return nil, err
		}
		return c.Modern(RequestMeta{ClientCapabilities: declared}).ListTools(ctx, limit)
	}
}

// mergeNeeds is the union of what two eras' listings found each tool to need.
func mergeNeeds(a, b map[string][]string) map[string][]string {
	if len(a) == 0 {
		return b
	}
	out := maps.Clone(a)
	for name, caps := range b {
		merged := slices.Concat(out[name], caps)
		slices.Sort(merged)
		out[name] = slices.Compact(merged)
	}
	return out
}
