package discovery

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
)

// Each test here checks one technique of the ranking, on tools made for it: each
// fails when its technique is taken out.

// tool is a tools/list entry with a description and, optionally, parameters.
func tool(name, description string, params ...string) json.RawMessage {
	props := map[string]any{}
	for _, p := range params {
		props[p] = map[string]any{"type": "string"}
	}
	raw, _ := json.Marshal(map[string]any{"name": name, "description": description,
		"inputSchema": map[string]any{"type": "object", "properties": props}})
	return raw
}

// found is the names of the tools Search finds for q among tools, best first.
func found(t *testing.T, tools map[string]json.RawMessage, q string) []string {
	t.Helper()
	x, err := Build(tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	res, err := x.Search(q, 5, Visibility{})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	var names []string
	for _, f := range res.Tools {
		names = append(names, f.Name)
	}
	return names
}

func wantFirst(t *testing.T, tools map[string]json.RawMessage, q, want string) {
	t.Helper()
	if got := found(t, tools, q); len(got) == 0 || got[0] != want {
		t.Errorf("%q found %v, want %s first", q, got, want)
	}
}

// A name in camelCase or with separators is found by its words.
func TestDiscoveryFindsANameByItsWords(t *testing.T) {
	tools := map[string]json.RawMessage{
		"getWeatherForecast": tool("getWeatherForecast", "Answers what the sky will do tomorrow."),
		"send-mail":          tool("send-mail", "Sends a letter."),
	}
	wantFirst(t, tools, "weather forecast for Paris", "getWeatherForecast")
	wantFirst(t, tools, "mail this to Bob", "send-mail")
}

// A word is found in its other forms: the English analyzer stems both sides.
func TestDiscoveryMatchesStemmedForms(t *testing.T) {
	tools := map[string]json.RawMessage{
		"remove_entry": tool("remove_entry", "Deletes one entry."),
		"open_log":     tool("open_log", "Opens the journal."),
	}
	wantFirst(t, tools, "deleting entries", "remove_entry")
}

// A task's word finds a definition that says the same thing in another word of a
// synonym group, and the word the task used still ranks first.
func TestDiscoveryFindsSynonyms(t *testing.T) {
	tools := map[string]json.RawMessage{
		"delete_directory": tool("delete_directory", "Deletes a directory and all it holds."),
		"list_files":       tool("list_files", "Lists the files in a folder."),
	}
	wantFirst(t, tools, "erase a folder", "delete_directory")
	wantFirst(t, tools, "show what is in a folder", "list_files")
}

// A word no definition uses is read as the indexed words one or two edits away.
func TestDiscoveryForgivesATypo(t *testing.T) {
	tools := map[string]json.RawMessage{
		"take_screenshot": tool("take_screenshot", "Captures the visible page as an image."),
		"close_page":      tool("close_page", "Closes the page."),
	}
	wantFirst(t, tools, "grab a screeenshot", "take_screenshot")
	if got := found(t, tools, "kubernets"); len(got) != 0 {
		t.Errorf("a word with no indexed word near it found %v", got)
	}
}

// The words that frame a task ("the user wants to") are not searched for.
func TestDiscoveryIgnoresTaskFraming(t *testing.T) {
	tools := map[string]json.RawMessage{
		"get_users":  tool("get_users", "Lists the users of the workspace."),
		"send_email": tool("send_email", "Sends an email."),
		"list_tools": tool("list_tools", "Lists the tools a server has."),
	}
	for _, q := range []string{"the user wants to send an email to Bob", "find out whether I can send an email", "send an email with a tool"} {
		if got := found(t, tools, q); strings.Join(got, ",") != "send_email" {
			t.Errorf("%q found %v, want only send_email", q, got)
		}
	}
}

// A file name or a URL in a task says it is about a file or a URL.
func TestDiscoveryReadsFileNamesAndURLs(t *testing.T) {
	tools := map[string]json.RawMessage{
		"read_file": tool("read_file", "Reads a file."),
		"open_page": tool("open_page", "Opens a web page.", "url"),
		"list_tabs": tool("list_tabs", "Lists the tabs."),
	}
	wantFirst(t, tools, "what is in notes.txt", "read_file")
	wantFirst(t, tools, "what is at https://example.com", "open_page")
}

// An identifier in a task is searched for by its words too, as names are indexed.
func TestDiscoverySplitsIdentifiersInTheQuery(t *testing.T) {
	tools := map[string]json.RawMessage{
		"list_messages": tool("list_messages", "Lists what the page wrote to its console."),
		"close_page":    tool("close_page", "Closes the tab."),
	}
	wantFirst(t, tools, "what did console.log print", "list_messages")
}

// What a description's first sentence says weighs more than the advice after it,
// which names other things.
func TestDiscoveryWeighsTheFirstSentence(t *testing.T) {
	tools := map[string]json.RawMessage{
		"draw_map":     tool("draw_map", "Draws a map of a place. Geocode each address first: geocode every address you have, then pass their coordinates."),
		"lookup_place": tool("lookup_place", "Geocodes an address into coordinates, with what the provider knows of the place: its region, country, postal code, time zone, population, elevation and neighbourhoods."),
	}
	wantFirst(t, tools, "geocode an address", "lookup_place")
}

// A tool's score is the sum of its fields' scores: a tool whose first sentence does not
// say the task's words is not scaled down for it.
func TestDiscoverySumsTheFieldsScores(t *testing.T) {
	x, err := Build(map[string]json.RawMessage{
		"forward_port": tool("forward_port", "Opens a tunnel. It forwards a local port to a port of a pod."),
		"misc":         tool("misc", "Does other things."),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	q, _ := x.query("forward a port")
	req := bleve.NewSearchRequest(q)
	req.Explain = true
	res, err := x.idx.Search(req)
	if err != nil || len(res.Hits) == 0 || res.Hits[0].ID != toolPrefix+"forward_port" {
		t.Fatalf("search: %v, %v", err, res)
	}
	// The top disjunction's coordination factor: the share of its clauses (fields) that
	// match.
	for _, e := range res.Hits[0].Expl.Children {
		var n, of int
		if _, err := fmt.Sscanf(e.Message, "coord(%d/%d)", &n, &of); err == nil && n < of {
			t.Errorf("the score is scaled by the share of fields that match: %s", e.Message)
		}
	}
	if got := found(t, map[string]json.RawMessage{"forward_port": tool("forward_port", "Forwards a port."), "misc": tool("misc", "Does other things.")},
		"forward a port"); strings.Join(got, ",") != "forward_port" {
		t.Errorf("found %v: a document that matches nothing was found", got)
	}
}

// A tool whose name says the task is found first, however long the text of its
// parameters, which dilutes its name in the whole definition.
func TestDiscoveryWeighsTheName(t *testing.T) {
	long := make([]string, 0, 40)
	for i := range 40 {
		long = append(long, fmt.Sprintf("option%d", i))
	}
	tools := map[string]json.RawMessage{
		"git_log":        tool("git_log", "View commit history, filtered by author, date range, path or message, page by page.", long...),
		"toggle_logging": tool("toggle_logging", "Toggles logging on or off."),
	}
	for i := range 20 { // other servers' tools
		name := fmt.Sprintf("tool%d", i)
		tools[name] = tool(name, "Does "+strings.Repeat("another ", i)+"thing.")
	}
	wantFirst(t, tools, "git log, last 10", "git_log")
}

// An abbreviation is read as its long form, at full weight.
func TestDiscoveryExpandsAbbreviations(t *testing.T) {
	tools := map[string]json.RawMessage{
		"create_pull_request": tool("create_pull_request", "Creates a pull request."),
		"open_page":           tool("open_page", "Opens a page in a new tab: open anything you want opened."),
	}
	wantFirst(t, tools, "open a PR", "create_pull_request")
}

// A phrasal verb is read as the single verbs definitions use for it.
func TestDiscoveryReadsPhrasalVerbs(t *testing.T) {
	tools := map[string]json.RawMessage{
		"delete_branch": tool("delete_branch", "Deletes or removes a branch."),
		"get_branch":    tool("get_branch", "Gets a branch's details."),
	}
	wantFirst(t, tools, "get rid of the old branch", "delete_branch")
	wantFirst(t, tools, "tear down the old branch", "delete_branch")
}
