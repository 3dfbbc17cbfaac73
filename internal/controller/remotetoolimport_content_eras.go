package controller

import (
	"encoding/json"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A dual-era remote may list other content to a client of 2026-07-28 than to one of
// 2025-11-25: a prompt that asks for input with an input-required result exists only in
// the newer era. The import serves the union, each item once by its key, with the eras
// it is listed in. An item of both eras is served as its 2025-11-25 entry defines it,
// which its digest covers, so nothing changes for a remote that lists its content
// alike in both; an item of 2026-07-28 only is served with that era's entry, and its
// digest, like any item's, is part of the catalog digest.

// contentEras are, per kind (contentKind.label), the eras each entry is listed in, by
// the key the status records it under.
type contentEras map[string]map[string][]string

// contentOfEveryEra is what res lists besides tools in every era the remote serves: its
// main listing (res.Content), then the entries only its 2026-07-28 listing has; and the
// eras of each entry. The eras are empty for a remote listed in one era.
func contentOfEveryEra(res *mcpclient.Result) (mcpclient.Content, contentEras) {
	if res.ModernContent == nil || !res.Serves(mcpclient.EraModern) || !res.Serves(mcpclient.EraLegacy) {
		return res.Content, nil
	}
	merged, eras := res.Content, contentEras{}
	for _, k := range []struct {
		kind           contentKind
		legacy, modern []json.RawMessage
		into           *[]json.RawMessage
	}{
		{promptContent, res.Content.Prompts, res.ModernContent.Prompts, &merged.Prompts},
		{resourceContent, res.Content.Resources, res.ModernContent.Resources, &merged.Resources},
		{resourceTemplateContent, res.Content.ResourceTemplates, res.ModernContent.ResourceTemplates, &merged.ResourceTemplates},
		{skillContent, res.Content.Skills, res.ModernContent.Skills, &merged.Skills},
	} {
		byKey := map[string][]string{}
		*k.into = mergeEraEntries(k.kind, k.legacy, k.modern, byKey)
		eras[k.kind.label] = byKey
	}
	return merged, eras
}

// mergeEraEntries is legacy followed by the entries of modern whose key it lacks; eras
// gets the eras of each key.
func mergeEraEntries(kind contentKind, legacy, modern []json.RawMessage, eras map[string][]string) []json.RawMessage {
	inModern := map[string]bool{}
	for _, raw := range modern {
		inModern[entryKey(kind, raw)] = true
	}
	out := make([]json.RawMessage, 0, len(legacy)+len(modern))
	for _, raw := range legacy {
		key := entryKey(kind, raw)
		eras[key] = []string{mcpclient.EraLegacy}
		if inModern[key] {
			eras[key] = mcpclient.Eras()
		}
		out = append(out, raw)
	}
	for _, raw := range modern {
		key := entryKey(kind, raw)
		if _, seen := eras[key]; seen {
			continue
		}
		eras[key] = []string{mcpclient.EraModern}
		out = append(out, raw)
	}
	return out
}

// annotate sets the eras of each entry of kind.
func (e contentEras) annotate(kind contentKind, entries []contentEntry) {
	for i := range entries {
		entries[i].content.Eras = e[kind.label][entries[i].key]
	}
}
