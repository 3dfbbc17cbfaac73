package discovery

import (
	"maps"
	"slices"
)

// synonymGroups are words a task and a tool definition use for the same thing: the
// verbs of reading, listing, creating, changing, deleting, searching, running and
// stopping, and nouns and adjectives many kinds of tools share. A query's word brings
// the other words of its groups, at a lower weight. General vocabulary only, never a
// tool's or a server's name, and no group that only one benchmark task needs: the list
// must help with any server's tools. The groups after the first block came from the
// benchmark's development sets' misses (docs/benchmarks.md).
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
	{"bug", "issue", "ticket", "problem"},
	{"picture", "image", "photo", "png", "jpg", "jpeg", "gif", "svg"},
	{"error", "failure", "exception", "crash"},
	{"user", "member", "person", "people", "account"},
	{"website", "site", "web page"},
	{"remember", "recall", "memory", "memorize"},
	{"altitude", "elevation", "height"},
	{"watch", "watcher", "monitor", "track"},
	{"size", "large", "big", "bigger", "small", "smaller"},
	{"internet", "web", "online"},
	{"fake", "simulated", "mock", "dummy"},
	{"alert", "dialog", "popup", "prompt"},
	{"pack", "compress", "zip", "gzip", "archive"},
	{"multiple", "several", "many", "batch"},
	{"far", "distance"},
	{"car", "drive", "driving"},
	{"load", "navigate", "visit", "open"},
	{"column", "property", "field"},
	{"add", "insert", "upsert"},
	{"length", "long", "km", "miles", "distance"},
	{"allowed", "permitted", "permission", "authorized"},
	{"coordinates", "latitude", "longitude", "lat", "lng", "geocode"},
}

// abbreviations are the short forms tasks use for what definitions spell out, each
// read as its long form too, at full weight: the same thing, not a neighbour.
var abbreviations = map[string]string{
	"pr": "pull request", "prs": "pull requests", "mr": "merge request", "mrs": "merge requests",
	"repo": "repository", "repos": "repositories", "dir": "directory", "dirs": "directories",
	"mkdir": "make directory", "rm": "remove", "cd": "change directory", "ls": "list",
	"db": "database", "env": "environment", "info": "information",
	"docs": "documentation", "auth": "authentication", "msg": "message", "img": "image",
	"k8s": "kubernetes", "ci": "continuous integration",
}

// phrasalVerbs are the verbs of everyday task language that take a particle ("get
// rid of", "set up"), each with the single verbs definitions use for it. A verb is
// matched in any of its forms ("setting up").
var phrasalVerbs = []struct{ verb, particle, means string }{
	{"get", "rid of", "delete remove"},
	{"set", "up", "create configure"},
	{"turn", "on", "enable start toggle"},
	{"turn", "off", "disable stop toggle"},
	{"switch", "on", "enable start toggle"},
	{"switch", "off", "disable stop toggle"},
	{"look", "up", "search find"},
	{"look", "at", "view inspect"},
	{"look", "for", "search find"},
	{"look", "into", "investigate inspect"},
	{"put", "into", "move insert"},
	{"take", "out", "remove extract"},
	{"pull", "out", "extract"},
	{"tear", "down", "delete remove destroy"},
	{"clean", "up", "cleanup remove delete"},
	{"kick", "off", "start trigger run"},
	{"fire", "off", "start trigger run"},
	{"spin", "up", "start create"},
	{"shut", "down", "stop close"},
	{"log", "in", "login authenticate"},
	{"sign", "in", "login authenticate"},
	{"log", "out", "logout"},
	{"sign", "off", "approve"},
	{"back", "up", "backup copy"},
	{"roll", "back", "rollback revert undo"},
	{"fill", "in", "fill enter"},
	{"fill", "out", "fill enter"},
	{"go", "to", "navigate open"},
	{"go", "back", "back previous"},
	{"keep", "track of", "track monitor"},
	{"keep", "in mind", "remember"},
	{"pull", "up", "retrieve show"},
	{"thin", "out", "simplify reduce"},
	{"write", "down", "write save record"},
	{"set", "aside", "save store keep"},
	{"bring", "up to date", "update sync"},
	{"close", "by", "near nearby"},
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
