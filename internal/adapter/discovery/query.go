package discovery

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// How a query is scored. A task's words are looked up, as terms of the English
// analyzer (stemmed, without stop words), in three fields: the whole definition
// (fieldAll), the description's first sentence (fieldSummary), which says what the
// tool does before the advice on when to use it names other things, and the name's
// words (fieldName). Each field scores by BM25 the query's terms, at a lower weight
// the synonyms of its words, and, for a word no definition uses, the indexed words one
// or two edits away (a typo); a tool's score is the sum. Weights are set per term:
// bleve ignores a disjunction's boost. Tuned on hack/discoverybench's queries.jsonl,
// holdout.jsonl and holdout2.jsonl (docs/benchmarks.md tells in what order).
const (
	// synonymWeight weighs a synonym against the word the task used.
	synonymWeight = 0.4
	// fuzzyWeight weighs a word one or two edits away from an unknown word.
	fuzzyWeight = 0.5
	// nameBoost weighs the name's words, a short field: what a tool is called
	// says what it does, however long its parameters' text.
	nameBoost = 0.3
	// fuzzyMinLength: shorter unknown words are names, numbers or noise more often
	// than typos, and one edit turns them into too many words.
	fuzzyMinLength = 5
)

// queriedFields are the fields a query is looked up in, with their weights.
var queriedFields = []struct {
	name  string
	boost float64
}{{fieldAll, 1}, {fieldSummary, 1}, {fieldName, nameBoost}}

var (
	// framing are the words that frame a task rather than say it ("the user wants
	// to", "find out whether"): their words ("user", "find") name what tools do.
	// And "tool": every document is one.
	framing = regexp.MustCompile(`(?i)\b(?:(?:the )?user (?:wants|needs|would like|is asking|asks|asked|is|has)(?: me)?(?: to)?|(?:i|we) (?:want|need|would like)(?: to)?|find out(?: whether| if)?|(?:can|could) you|help me|please|(?:with |using |use )?(?:a |the |an )?tools?)\b`)
	// urlToken and fileToken are tokens that name a URL or a file, words tool
	// definitions use where a task gives the thing itself.
	urlToken  = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)
	fileToken = regexp.MustCompile(`^[\w./-]*\w\.(?:txt|md|json|ya?ml|toml|ini|cfg|conf|csv|tsv|log|go|py|js|ts|java|rb|rs|c|h|cpp|sh|html|css|xml|pdf|png|jpe?g|gif|svg|zip|tar|gz)$`)
)

// phrasalPattern finds a phrasal verb in a task: the verb in any form, then the
// particle, maybe after one word ("set it up").
type phrasalPattern struct {
	re    *regexp.Regexp
	means string
}

var phrasalPatterns = func() []phrasalPattern {
	out := make([]phrasalPattern, len(phrasalVerbs))
	for i, p := range phrasalVerbs {
		particle := strings.ReplaceAll(regexp.QuoteMeta(p.particle), " ", `\s+`)
		out[i] = phrasalPattern{regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(p.verb) + `\w*\s+(?:\w+\s+)?` + particle + `\b`), p.means}
	}
	return out
}()

// prepare is q as the index reads it: without the words that frame the task; with
// the single verbs its phrasal verbs mean, each identifier's words ("feature/login",
// "console.log") as names are indexed, the long form of each abbreviation, and what a
// token is when it is a URL or a file name.
func prepare(q string) string {
	q = framing.ReplaceAllString(q, " ")
	var b strings.Builder
	b.WriteString(q)
	for _, p := range phrasalPatterns {
		if p.re.MatchString(q) {
			b.WriteString(" " + p.means)
		}
	}
	for _, tok := range strings.Fields(q) {
		tok = strings.Trim(strings.ToLower(tok), "\"'`()[]{}<>,;!?")
		switch {
		case urlToken.MatchString(tok):
			b.WriteString(" url")
		case fileToken.MatchString(tok):
			b.WriteString(" file")
		}
		if w := words(tok); w != tok {
			b.WriteString(" " + w)
		}
		if long, ok := abbreviations[tok]; ok {
			b.WriteString(" " + long)
		}
	}
	return b.String()
}

// queryTerms are the analyzed terms of q, the synonyms of its words that it does not
// use itself, and its words that no definition uses.
func (x *Index) queryTerms(q string) (terms map[string]bool, synonyms, unknown []string) {
	terms = x.analyze(prepare(q))
	for _, t := range slices.Sorted(maps.Keys(terms)) {
		for _, s := range x.synonyms[t] {
			if !terms[s] && !slices.Contains(synonyms, s) {
				synonyms = append(synonyms, s)
			}
		}
		if !x.vocabulary[t] && len(t) >= fuzzyMinLength {
			unknown = append(unknown, t)
		}
	}
	return terms, synonyms, unknown
}

// query scores the documents for q: per queried field, a disjunction of q's terms, its
// synonyms and its unknown words' neighbours (whose coordination factor favours the
// documents that match more of them); and the sum of the fields' scores. It answers
// too the terms a reason may name (q's and their synonyms); nil when q has no words
// to search for.
func (x *Index) query(q string) (query.Query, map[string]bool) {
	terms, synonyms, unknown := x.queryTerms(q)
	if len(terms) == 0 {
		return nil, nil
	}
	named := maps.Clone(terms)
	for _, s := range synonyms {
		named[s] = true
	}
	var clauses []query.Query
	for _, f := range queriedFields {
		var alts []query.Query
		if f.boost == 0 {
			continue
		}
		for _, t := range slices.Sorted(maps.Keys(terms)) {
			alts = append(alts, termQuery(t, f.name, f.boost))
		}
		for _, s := range synonyms {
			alts = append(alts, termQuery(s, f.name, f.boost*synonymWeight))
		}
		for _, t := range unknown {
			fq := bleve.NewFuzzyQuery(t)
			fq.SetField(f.name)
			fq.Fuzziness = 1
			if len(t) >= 8 {
				fq.Fuzziness = 2
			}
			fq.SetBoost(f.boost * fuzzyWeight)
			alts = append(alts, fq)
		}
		d := bleve.NewDisjunctionQuery(alts...)
		clauses = append(clauses, uncoordinated(d))
	}
	return bleve.NewDisjunctionQuery(clauses...), named
}

func termQuery(term, field string, boost float64) query.Query {
	tq := bleve.NewTermQuery(term)
	tq.SetField(field)
	tq.SetBoost(boost)
	return tq
}

// uncoordinated is q matching every document, at no score where q does not match: a
// disjunction of such clauses has a coordination factor of 1, and scores the sum of
// its clauses' scores, as BM25 sums its terms', instead of scaling it by the share of
// clauses that match (which halved a tool whose first sentence does not say the
// task's words, however well the rest of it did).
func uncoordinated(q query.Query) query.Query {
	all := bleve.NewMatchAllQuery()
	all.SetBoost(0)
	return bleve.NewDisjunctionQuery(q, all)
}
