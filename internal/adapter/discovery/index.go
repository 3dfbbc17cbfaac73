// Package discovery is progressive discovery's search: an in-memory full-text index
// (bleve, BM25) over every tool an adapter serves and every agent skill it holds,
// built once per config at (re)load — not per session, so a stateless client on any
// replica searches the same index. A search ranks what matches and keeps only what the
// caller may see before it cuts the list to its limit, so that a caller gets as many
// tools as it asked for when that many are visible to it, and never a tool it may not
// call.
package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
)

// The fields of a document: each is kept (analyzed) to say why a search found it.
// All of them are indexed as one text, fieldAll, the name twice: a task's words spread
// over a tool's name, description and parameters. Beside it are indexed the name's
// words and the description's first sentence (fieldSummary), scored with it
// (query.go).
const (
	fieldName        = "name"
	fieldTitle       = "title"
	fieldDescription = "description"
	fieldParams      = "params"
	fieldAnnotations = "annotations"
	fieldBody        = "body"
	fieldSummary     = "summary"
	fieldAll         = "all"
)

// reasonFields are the fields a reason names, in the order it names them.
var reasonFields = []string{fieldName, fieldTitle, fieldDescription, fieldParams, fieldAnnotations, fieldBody}

// Document id prefixes: tools and skills share the index.
const (
	toolPrefix  = "t:"
	skillPrefix = "s:"
)

// closeDelay is how long an index replaced by a reload stays open for the searches
// that started on it; a search takes milliseconds.
const closeDelay = time.Minute

// Skill is an agent skill as the index reads it.
type Skill struct {
	// Path is what authorization rules govern; URI is its SKILL.md's.
	Path, URI string
	// Frontmatter is SKILL.md's frontmatter as a JSON object.
	Frontmatter json.RawMessage
	// Body is SKILL.md's text; empty for an imported skill (frontmatter only).
	Body string
}

// Index is one config's search index. It is safe for concurrent searches.
type Index struct {
	idx      bleve.Index
	analyzer analysis.Analyzer
	// entries are the tools/list entries by tool name, answered as found.
	entries map[string]json.RawMessage
	// terms are each document's analyzed terms by field, for the reasons.
	terms map[string]map[string]map[string]bool
	// vocabulary is every term indexed.
	vocabulary map[string]bool
	synonyms   synonyms
	skills     map[string]*indexedSkill
}

// indexedSkill is a skill with the tools it uses.
type indexedSkill struct {
	Skill
	name, description string
	// tools are the served tools it uses: its allowed-tools, then the exact tool names
	// its body mentions.
	tools []string
}

// Build indexes the tools (their tools/list entries by served name, as tools/list
// would list them) and skills.
func Build(tools map[string]json.RawMessage, skills []Skill) (*Index, error) {
	m := newMapping()
	// scorch with no path keeps its segments in memory. Not bleve.NewMemOnly: its
	// upsidedown index cannot tell a field's length, and scores by TF-IDF whatever the
	// mapping's scoring model says.
	idx, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("discovery index: %w", err)
	}
	x := &Index{idx: idx, analyzer: m.AnalyzerNamed(en.AnalyzerName), entries: tools,
		terms: make(map[string]map[string]map[string]bool, len(tools)+len(skills)), vocabulary: map[string]bool{}, skills: map[string]*indexedSkill{}}
	x.synonyms = newSynonyms(x.analyze)
	batch := idx.NewBatch()
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		doc := toolDocument(name, tools[name])
		if err := x.add(batch, toolPrefix+name, doc); err != nil {
			return nil, err
		}
	}
	for _, s := range skills {
		sk := newIndexedSkill(s, tools)
		x.skills[skillPrefix+s.Path] = sk
		if err := x.add(batch, skillPrefix+s.Path, sk.document()); err != nil {
			return nil, err
		}
	}
	if err := idx.Batch(batch); err != nil {
		_ = idx.Close()
		return nil, fmt.Errorf("discovery index: %w", err)
	}
	return x, nil
}

func (x *Index) add(batch *bleve.Batch, id string, doc map[string]string) error {
	indexed := map[string]string{
		fieldAll:     strings.Join([]string{doc[fieldName], doc[fieldName], doc[fieldTitle], doc[fieldDescription], doc[fieldParams], doc[fieldAnnotations], doc[fieldBody]}, " "),
		fieldSummary: firstSentence(doc[fieldDescription]),
		fieldName:    doc[fieldName],
	}
	if err := batch.Index(id, indexed); err != nil {
		_ = x.idx.Close()
		return fmt.Errorf("discovery index: document %q: %w", id, err)
	}
	byField := make(map[string]map[string]bool, len(doc))
	for field, text := range doc {
		byField[field] = x.analyze(text)
		for t := range byField[field] {
			x.vocabulary[t] = true
		}
	}
	x.terms[id] = byField
	return nil
}

// firstSentence is a description's first sentence: what the tool does, before the
// advice on when to use it, which names other things.
func firstSentence(text string) string {
	text = strings.TrimSpace(text)
	for i, r := range text {
		if (r == '.' || r == '\n') && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\n') {
			return text[:i]
		}
	}
	return text
}

// Tools is the number of tools indexed.
func (x *Index) Tools() int { return len(x.entries) }

// Skills is the number of skills indexed.
func (x *Index) Skills() int { return len(x.skills) }

// Retire closes the index once the searches that may still run on it are done; a
// reload calls it on the index it replaced.
func (x *Index) Retire() {
	if x != nil {
		time.AfterFunc(closeDelay, func() { _ = x.idx.Close() })
	}
}

// Close closes the index now.
func (x *Index) Close() error { return x.idx.Close() }

func newMapping() *mapping.IndexMappingImpl {
	m := bleve.NewIndexMapping()
	m.ScoringModel = index.BM25Scoring
	m.DefaultAnalyzer = en.AnalyzerName
	m.StoreDynamic, m.IndexDynamic, m.DocValuesDynamic = false, false, false
	doc := bleve.NewDocumentStaticMapping()
	fm := bleve.NewTextFieldMapping()
	fm.Analyzer = en.AnalyzerName
	fm.Store, fm.IncludeTermVectors, fm.IncludeInAll, fm.DocValues = false, false, false, false
	doc.AddFieldMappingsAt(fieldAll, fm)
	doc.AddFieldMappingsAt(fieldSummary, fm)
	doc.AddFieldMappingsAt(fieldName, fm)
	m.DefaultMapping = doc
	return m
}

// analyze is the set of terms the index's analyzer makes of text.
func (x *Index) analyze(text string) map[string]bool {
	out := map[string]bool{}
	for _, tok := range x.analyzer.Analyze([]byte(text)) {
		out[string(tok.Term)] = true
	}
	return out
}

// toolEntry is what the index reads of a tools/list entry.
type toolEntry struct {
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations struct {
		Title           string `json:"title"`
		ReadOnlyHint    *bool  `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint"`
		IdempotentHint  *bool  `json:"idempotentHint"`
		OpenWorldHint   *bool  `json:"openWorldHint"`
	} `json:"annotations"`
}

func toolDocument(name string, entry json.RawMessage) map[string]string {
	var e toolEntry
	_ = json.Unmarshal(entry, &e) // an entry that does not decode is found by its name
	var ann []string
	for _, h := range []struct {
		set  *bool
		text string
	}{{e.Annotations.ReadOnlyHint, "read only"}, {e.Annotations.DestructiveHint, "destructive"},
		{e.Annotations.IdempotentHint, "idempotent"}, {e.Annotations.OpenWorldHint, "open world"}} {
		if h.set != nil && *h.set {
			ann = append(ann, h.text)
		}
	}
	return map[string]string{
		fieldName:        words(name) + " " + name,
		fieldTitle:       strings.TrimSpace(e.Title + " " + e.Annotations.Title),
		fieldDescription: e.Description,
		fieldParams:      paramsText(e.InputSchema, 2),
		fieldAnnotations: strings.Join(ann, " "),
	}
}

// paramsText is the names and descriptions of a schema's properties, depth levels deep.
func paramsText(schema json.RawMessage, depth int) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Items      json.RawMessage            `json:"items"`
	}
	if depth == 0 || json.Unmarshal(schema, &s) != nil {
		return ""
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		var p struct {
			Description string `json:"description"`
			Title       string `json:"title"`
			Enum        []any  `json:"enum"`
		}
		_ = json.Unmarshal(s.Properties[name], &p)
		fmt.Fprintf(&b, "%s %s %s ", words(name), p.Title, p.Description)
		for _, v := range p.Enum { // the values say what the tool can do: "closed", "drain"
			if text, ok := v.(string); ok {
				fmt.Fprintf(&b, "%s ", words(text))
			}
		}
		b.WriteString(paramsText(s.Properties[name], depth-1))
	}
	if len(s.Items) > 0 {
		b.WriteString(paramsText(s.Items, depth-1))
	}
	return b.String()
}

// words splits an identifier into words: "readTextFile" and "read_text-file" both
// become "read text file", so that a query in words finds a tool by its name.
func words(id string) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range id {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || r == ':':
			b.WriteByte(' ')
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			b.WriteByte(' ')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

func newIndexedSkill(s Skill, tools map[string]json.RawMessage) *indexedSkill {
	var fm struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		AllowedTools json.RawMessage `json:"allowed-tools"`
	}
	_ = json.Unmarshal(s.Frontmatter, &fm) // checked when the config was; fields missing then
	sk := &indexedSkill{Skill: s, name: fm.Name, description: fm.Description}
	seen := map[string]bool{}
	use := func(name string) {
		if _, served := tools[name]; served && !seen[name] {
			seen[name] = true
			sk.tools = append(sk.tools, name)
		}
	}
	for _, name := range allowedTools(fm.AllowedTools) {
		use(name)
	}
	for _, name := range identifiers(stripFrontmatter(s.Body)) {
		use(strings.TrimRight(name, ".-")) // a name ending a sentence
	}
	return sk
}

func (sk *indexedSkill) document() map[string]string {
	return map[string]string{
		fieldName:        words(sk.name) + " " + sk.name,
		fieldDescription: sk.description,
		fieldBody:        stripFrontmatter(sk.Body),
	}
}

// allowedTools reads allowed-tools: a string of names separated by spaces or commas
// (the Agent Skills form), or a list; "Bash(git:*)" names the tool Bash.
func allowedTools(raw json.RawMessage) []string {
	var list []string
	var text string
	switch {
	case json.Unmarshal(raw, &text) == nil:
		list = strings.FieldsFunc(text, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	case json.Unmarshal(raw, &list) == nil:
	default:
		return nil
	}
	out := make([]string, 0, len(list))
	for _, name := range list {
		if i := strings.IndexByte(name, '('); i >= 0 {
			name = name[:i]
		}
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// identifiers are the runs of tool-name characters in text, in order.
func identifiers(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool { return !nameChar(r) })
}

// nameChar says whether r may be part of a tool name (MCP tool-name rules).
func nameChar(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.')
}

// stripFrontmatter is a SKILL.md without its leading "---" block.
func stripFrontmatter(body string) string {
	rest, ok := strings.CutPrefix(body, "---")
	if !ok {
		return body
	}
	if _, after, found := strings.Cut(rest, "\n---"); found {
		return after
	}
	return body
}

// errEmptyQuery refuses a search for nothing.
var errEmptyQuery = errors.New("the query has no words to search for")
