package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
)

func testTools() map[string]json.RawMessage {
	return map[string]json.RawMessage{
		"read_text_file": json.RawMessage(`{"name":"read_text_file","description":"Read the complete contents of a file from the file system as text.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`),
		"write_file":     json.RawMessage(`{"name":"write_file","description":"Create a new file or completely overwrite an existing file with new content.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}`),
		"create_issue":   json.RawMessage(`{"name":"create_issue","description":"Open a new issue in a GitHub repository.","inputSchema":{"type":"object","properties":{"title":{"type":"string","description":"Issue title"}}}}`),
		"fill_form":      json.RawMessage(`{"name":"fill_form","description":"Fill the fields of a document.","inputSchema":{"type":"object"}}`),
	}
}

// Ranking, the caller's visibility before the cut, and a skill that brings its tools.
func TestDiscoveryIndexRanksFiltersAndExpandsSkills(t *testing.T) {
	x, err := Build(testTools(), []Skill{{Path: "pdf", URI: "skill://pdf/SKILL.md",
		Frontmatter: json.RawMessage(`{"name":"pdf","description":"Work with PDF forms","allowed-tools":"fill_form"}`),
		Body:        "---\nname: pdf\n---\nTo read a PDF, call read_text_file."}})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	got, err := x.Search("read the contents of a file", 2, Visibility{})
	if err != nil || len(got.Tools) == 0 || got.Tools[0].Name != "read_text_file" {
		t.Fatalf("search: %+v, %v", got, err)
	}
	if !strings.Contains(got.Tools[0].Reason, `"read"`) || !strings.Contains(string(got.Tools[0].Definition), `"readOnlyHint":true`) {
		t.Errorf("first hit %+v", got.Tools[0])
	}
	hidden, _ := x.Search("read the contents of a file", 2, Visibility{Tool: func(name string) bool { return name != "read_text_file" }})
	for _, f := range hidden.Tools {
		if f.Name == "read_text_file" {
			t.Fatal("a tool the caller may not see was found")
		}
	}
	if len(hidden.Tools) != 2 {
		t.Errorf("the cut came before the filter: %d tools", len(hidden.Tools))
	}
	pdf, _ := x.Search("fill in a pdf form", 5, Visibility{})
	if len(pdf.Skills) != 1 || strings.Join(pdf.Skills[0].Tools, ",") != "fill_form,read_text_file" {
		t.Fatalf("skill hit %+v", pdf.Skills)
	}
	noSkill, _ := x.Search("pdf", 5, Visibility{Skill: func(string) bool { return false }})
	if len(noSkill.Skills) != 0 || len(noSkill.Tools) != 0 {
		t.Errorf("a hidden skill was found: %+v", noSkill)
	}
	if _, err := x.Search("the of", 5, Visibility{}); err == nil {
		t.Error("a query of stop words was searched")
	}
}

// The index scores by BM25, as its mapping asks: the explanation of a score names
// BM25's saturation, which TF-IDF's has not.
func TestDiscoveryIndexScoresByBM25(t *testing.T) {
	x, err := Build(testTools(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	q, _ := x.query("read a file")
	req := bleve.NewSearchRequest(q)
	req.Explain = true
	res, err := x.idx.Search(req)
	if err != nil || len(res.Hits) == 0 {
		t.Fatalf("search: %v, %d hits", err, len(res.Hits))
	}
	if expl, _ := json.Marshal(res.Hits[0].Expl); !strings.Contains(string(expl), "saturation") {
		t.Fatalf("not scored by BM25: %s", expl)
	}
}
