package mcpclient

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// pagedServer is a streamable HTTP server whose tools/list (and prompts/list and
// skills/list) answers are pages, by the cursor asked for ("" for the first).
func pagedServer(t *testing.T, pages map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize":
			writeJSON(w, http.StatusOK, result(m.ID, initResult))
		case "tools/list", "prompts/list", "skills/list":
			writeJSON(w, http.StatusOK, result(m.ID, json.RawMessage(pages[m.Params.Cursor])))
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestListTools_PagesAndBounds: the generic paged list under ListTools follows the
// cursors in order and stops, with a reason, at every way a listing can go wrong.
func TestListTools_PagesAndBounds(t *testing.T) {
	const a, b, c = `{"name":"a","inputSchema":{"type":"object"}}`, `{"name":"b"}`, `{"name":"c","description":"C"}`
	for _, tc := range []struct {
		name   string
		pages  map[string]string
		limit  int
		want   []string
		reason string
		detail string
	}{
		{name: "three pages", pages: map[string]string{
			"": `{"tools":[` + a + `],"nextCursor":"p2"}`, "p2": `{"tools":[` + b + `],"nextCursor":"p3"}`, "p3": `{"tools":[` + c + `],"nextCursor":null}`,
		}, want: []string{"a", "b", "c"}},
		{name: "a cursor twice", pages: map[string]string{
			"": `{"tools":[` + a + `],"nextCursor":"p2"}`, "p2": `{"tools":[` + b + `],"nextCursor":"p2"}`,
		}, reason: ReasonToolsListFailed, detail: "same tools/list cursor twice"},
		{name: "pages without end", limit: 2, pages: map[string]string{
			"": `{"tools":[],"nextCursor":"p2"}`, "p2": `{"tools":[],"nextCursor":"p3"}`, "p3": `{"tools":[],"nextCursor":"p4"}`,
		}, reason: ReasonToolsListFailed, detail: "did not end within 3 pages"},
		{name: "over the limit", limit: 2, pages: map[string]string{"": `{"tools":[` + a + `,` + b + `,` + c + `]}`},
			reason: ReasonResponseTooLarge, detail: "more than 2 tools"},
		{name: "a name twice", pages: map[string]string{"": `{"tools":[` + a + `],"nextCursor":"p2"}`, "p2": `{"tools":[` + a + `]}`},
			reason: ReasonProtocolError, detail: `the name "a" twice`},
		{name: "an entry without a name", pages: map[string]string{"": `{"tools":[{"description":"nameless"}]}`},
			reason: ReasonProtocolError, detail: "no name"},
		{name: "no tools array", pages: map[string]string{"": `{"prompts":[]}`},
			reason: ReasonProtocolError, detail: "no tools array"},
		{name: "a cursor that is not a string", pages: map[string]string{"": `{"tools":[],"nextCursor":7}`},
			reason: ReasonProtocolError, detail: "nextCursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := connectTo(t, pagedServer(t, tc.pages), TransportStreamableHTTP)
			tools, err := s.ListTools(testkit.Context(t, testBudget), tc.limit)
			if tc.reason == "" {
				names := make([]string, 0, len(tools))
				for _, tool := range tools {
					names = append(names, tool.Name)
				}
				if err != nil || !slices.Equal(names, tc.want) {
					t.Fatalf("ListTools = %v, %v; want %v", names, err, tc.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != tc.reason || !strings.Contains(e.Detail, tc.detail) {
				t.Fatalf("ListTools error %v, want reason %s with %q", err, tc.reason, tc.detail)
			}
		})
	}
}
