package discovery

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
)

// MaxQueryBytes bounds a query: a task description, not a document.
const MaxQueryBytes = 1024

// Visibility says what the caller of a search may see. Each function may spend the
// request's CEL budget; a search asks only about candidates, best first.
type Visibility struct {
	// Tool says whether the caller may call (and so find) the tool.
	Tool func(name string) bool
	// Skill says whether the caller may read the skill at path.
	Skill func(path string) bool
}

// Found is one tool a search found.
type Found struct {
	Name string
	// Definition is its tools/list entry, as tools/list would list it.
	Definition json.RawMessage
	// Reason says in one line why it was found.
	Reason string
	Score  float64
}

// FoundSkill is a skill a search found, with the visible tools it uses.
type FoundSkill struct {
	Name        string   `json:"name"`
	Path        string   `json:"path"`
	URI         string   `json:"uri"`
	Description string   `json:"description,omitempty"`
	Tools       []string `json:"tools,omitempty"`
}

// Result is a search's answer: at most limit tools, best first, and the skills that
// brought some of them.
type Result struct {
	Tools  []Found
	Skills []FoundSkill
}

// Search finds at most limit tools the caller may see for q, best first. Candidates
// are ranked by BM25 over the whole index and judged in that order, page by page,
// until limit are visible or none are left: the cut comes after the caller's rules.
// A skill that matches brings the visible tools it uses, right after it.
func (x *Index) Search(q string, limit int, see Visibility) (Result, error) {
	q = strings.TrimSpace(q)
	if len(q) > MaxQueryBytes {
		return Result{}, fmt.Errorf("the query has %d bytes, more than %d: describe the task in fewer words", len(q), MaxQueryBytes)
	}
	bq, terms := x.query(q)
	if bq == nil {
		return Result{}, errEmptyQuery
	}
	s := searchState{x: x, see: see, limit: limit, terms: terms, seen: map[string]bool{}}
	page := max(4*limit, 32)
	for from := 0; len(s.out.Tools) < limit; from += page {
		req := bleve.NewSearchRequestOptions(bq, page, from, false)
		res, err := x.idx.Search(req)
		if err != nil {
			return Result{}, fmt.Errorf("search: %w", err)
		}
		for _, hit := range res.Hits {
			if hit.Score <= 0 {
				return s.out, nil // the rest match none of the query's words
			}
			if s.take(hit.ID, hit.Score) {
				break
			}
		}
		if uint64(from+page) >= res.Total {
			break
		}
		page *= 2
	}
	return s.out, nil
}

// searchState is one search's progress through the ranked candidates.
type searchState struct {
	x     *Index
	see   Visibility
	limit int
	terms map[string]bool
	seen  map[string]bool
	out   Result
}

// take judges one candidate and reports whether the result is full.
func (s *searchState) take(id string, score float64) bool {
	if name, ok := strings.CutPrefix(id, toolPrefix); ok {
		s.addTool(name, score, s.reason(id))
		return len(s.out.Tools) >= s.limit
	}
	sk := s.x.skills[id]
	if sk == nil || (s.see.Skill != nil && !s.see.Skill(sk.Path)) {
		return false
	}
	found := FoundSkill{Name: sk.name, Path: sk.Path, URI: sk.URI, Description: sk.description}
	why := fmt.Sprintf("used by the skill %q, which %s", sk.name, s.reason(id))
	for _, name := range sk.tools {
		if len(s.out.Tools) >= s.limit {
			break
		}
		if s.addTool(name, score, why) || s.visibleSeen(name) {
			found.Tools = append(found.Tools, name)
		}
	}
	s.out.Skills = append(s.out.Skills, found)
	return len(s.out.Tools) >= s.limit
}

// addTool adds the tool when the caller may see it and it is not in the result yet.
func (s *searchState) addTool(name string, score float64, reason string) bool {
	if _, done := s.seen[name]; done {
		return false
	}
	visible := s.see.Tool == nil || s.see.Tool(name)
	s.seen[name] = visible
	if !visible {
		return false
	}
	entry, ok := s.x.entries[name]
	if !ok {
		return false
	}
	s.out.Tools = append(s.out.Tools, Found{Name: name, Definition: entry, Reason: reason, Score: score})
	return true
}

// visibleSeen says whether name was judged already and is in the result.
func (s *searchState) visibleSeen(name string) bool { return s.seen[name] }

// reason says which of the query's words the document matched, and where.
func (s *searchState) reason(id string) string {
	byField := s.x.terms[id]
	var where []string
	matched := map[string]bool{}
	for _, field := range reasonFields {
		hit := false
		for t := range s.terms {
			if byField[field][t] {
				matched[t], hit = true, true
			}
		}
		if hit {
			where = append(where, field)
		}
	}
	if len(matched) == 0 {
		return "matches the query"
	}
	words := slices.Sorted(maps.Keys(matched))
	if len(words) > 6 {
		words = append(words[:6], "…")
	}
	return fmt.Sprintf("matches %s in its %s", strings.Join(quoteAll(words), ", "), strings.Join(where, ", "))
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "…" {
			out[i] = w
			continue
		}
		out[i] = `"` + w + `"`
	}
	return out
}
