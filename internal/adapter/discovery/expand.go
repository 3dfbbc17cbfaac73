package discovery

import (
	"strings"
	"unicode"
)

// expansionBoost weighs the expansion's words against the query's own: they say what
// a task probably means, not what it says.
const expansionBoost = 0.4

// expansions map everyday words of a task to the words tool definitions use for the
// same thing. General computing vocabulary only, never a tool's name: it must help
// with any server's tools, not one benchmark's.
var expansions = map[string]string{
	"folder":      "directory",
	"folders":     "directory",
	"bug":         "issue",
	"bugs":        "issues",
	"ticket":      "issue",
	"picture":     "screenshot image",
	"image":       "screenshot",
	"photo":       "image screenshot",
	"press":       "click",
	"tap":         "click",
	"button":      "click element",
	"errors":      "console log messages",
	"error":       "console log message",
	"remember":    "memory knowledge graph observations entities",
	"recall":      "memory knowledge graph search",
	"stored":      "memory knowledge graph",
	"coordinates": "latitude longitude geocode",
	"latitude":    "coordinates geocode",
	"longitude":   "coordinates geocode",
	"address":     "geocode location",
	"altitude":    "elevation",
	"sea":         "elevation",
	"aside":       "stash",
	"shelve":      "stash",
	"nearby":      "places local search",
	"near":        "places local nearby",
	"shops":       "places businesses",
	"restaurants": "places businesses",
	"website":     "site url pages",
	"url":         "navigate page",
	"remove":      "delete",
	"erase":       "delete",
	"rename":      "move",
	"show":        "get list read",
	"look":        "search find",
	"download":    "fetch get",
	"pr":          "pull request",
	"prs":         "pull requests",
	"mr":          "merge request",
	"repo":        "repository",
	"repos":       "repositories",
	"ci":          "pipeline build workflow",
	"save":        "write create",
	"disk":        "file system",
	"inside":      "contents read",
	"crash":       "error failure",
	"slow":        "performance",
	"leak":        "memory heap",
	"route":       "directions",
	"reachable":   "isochrone",
}

// expand is the expansion of q's words, or "".
func expand(q string) string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if e, ok := expansions[w]; ok {
			out = append(out, e)
		}
	}
	return strings.Join(out, " ")
}
