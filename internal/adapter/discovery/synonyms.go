package discovery

import (
	"maps"
	"slices"
)

// synonymGroups are words a task and a tool definition use for the same thing: the
// verbs of reading, listing, creating, changing, deleting, searching, running and
// stopping, and a few nouns every kind of tool shares. A query's word brings the other
// words of its groups, at a lower weight. General vocabulary only, never a tool's or a
// server's name: the list must help with any server's tools, not one benchmark's.
var synonymGroups = [][]string{
	{"get", "fetch", "retrieve", "read", "obtain", "view", "show", "display", "see"},
	{"list", "enumerate", "show", "browse"},
	{"create", "make", "add", "new", "generate"},
	{"delete", "remove", "drop", "erase", "destroy", "discard", "purge"},
	{"search", "find", "query", "look", "lookup", "locate", "seek"},
	{"update", "edit", "modify", "change", "patch", "alter", "amend"},
	{"run", "execute", "trigger", "launch", "invoke", "start"},
	{"stop", "halt", "cancel", "terminate", "end", "abort"},
	{"write", "save", "store", "persist"},
	{"send", "post", "publish"},
	{"move", "rename", "relocate"},
	{"copy", "duplicate", "clone"},
	{"close", "shut", "exit", "quit"},
	{"upload", "attach"},
	{"check", "verify", "validate", "inspect"},
	{"compare", "diff"},
	{"undo", "revert", "rollback"},
	{"folder", "directory"},
	{"repo", "repository"},
	{"bug", "issue", "ticket", "problem"},
	{"pr", "pull request"},
	{"mr", "merge request"},
	{"picture", "image", "photo"},
	{"error", "failure", "exception", "crash"},
	{"user", "member", "person", "people", "account"},
	{"website", "site", "web page"},
	{"remember", "recall", "memory", "memorize"},
	{"altitude", "elevation", "height"},
	{"watch", "monitor", "track"},
	{"coordinates", "latitude", "longitude", "lat", "lng", "geocode"},
}

// synonyms maps an analyzed term to the analyzed terms of its groups' other words.
type synonyms map[string][]string

func newSynonyms(analyze func(string) map[string]bool) synonyms {
	out := synonyms{}
	for _, group := range synonymGroups {
		for _, w := range group {
			from := analyze(w)
			if len(from) != 1 {
				continue // a phrase or a stop word brings nothing
			}
			var to []string
			for _, other := range group {
				if other != w {
					to = append(to, slices.Sorted(maps.Keys(analyze(other)))...)
				}
			}
			for t := range from {
				out[t] = append(out[t], to...)
			}
		}
	}
	for t, to := range out {
		slices.Sort(to)
		out[t] = slices.DeleteFunc(slices.Compact(to), func(s string) bool { return s == t })
	}
	return out
}
