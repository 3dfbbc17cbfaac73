package subscribe

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// The listen parser keeps the distinct URIs in their first order and refuses a list
// longer than its bound, whatever its duplicates.
func TestListenSubscriptionsAreDistinctAndBounded(t *testing.T) {
	for _, tt := range []struct {
		name    string
		uris    []string
		want    []string
		refused bool
	}{
		{"distinct in first order", []string{"b", "", "b", "a"}, []string{"b", "a"}, false},
		{"at the bound", manyURIs(4), manyURIs(4), false},
		{"past the bound", manyURIs(5), nil, true},
		{"past the bound in duplicates", []string{"a", "a", "a", "a", "a"}, nil, true},
		{"60,000", manyURIs(60_000), nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := parseListen([]byte(listenBody(1, tt.uris)), 4)
			if tt.refused {
				if err == nil {
					t.Fatalf("parsed %d URIs, want a refusal past the bound of 4", len(req.uris))
				}
				return
			}
			if err != nil || !slices.Equal(req.uris, tt.want) || string(req.id) != "1" {
				t.Errorf("parsed %q id %s (%v), want %q id 1", req.uris, req.id, err, tt.want)
			}
		})
	}
}

// FuzzListenRequestIsBoundedAndDistinct: whatever the body, the listen parser never
// panics, never accepts more than its bound, gives no URI twice and no empty one, and
// agrees with encoding/json (mcp-go's reading): a list encoding/json reads as longer
// than the bound is refused, and one it reads within the bound gives its distinct URIs.
func FuzzListenRequestIsBoundedAndDistinct(f *testing.F) {
	const bound = 4
	for _, seed := range []string{
		listenBody(1, []string{"a", "b", "a"}),
		listenBody(1, manyURIs(5)),
		`{"id":1,"params":{"notifications":{"resourceSubscriptions":["a","b","c","d","e"],"ResourceSubscriptions":["x"]}}}`,
		`{"id":1,"PARAMS":{"Notifications":{"resourceSubscriptions":["a","a","a","a","a","a"]}}}`,
		`{"id":1,"params":{"notifications":{"resourceSubscriptions":["a",null,"b",1]}}}`,
		`{"id":1,"params":{"notifications":{"resourceSubscriptions":null}}}`,
		`{"id":1,"params":{"notifications":{"resource\u0053ubscriptions":["\u0061","a"]}}}`,
		`{"id":1,"params":5,"params":{"notifications":{"resourceSubscriptions":["a","b","c","d","e"]}}}`,
		`[1,2]`, `not json`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseListen(body, bound)
		if err != nil {
			if len(req.uris) > 0 {
				t.Fatalf("a refusal carries URIs %q", req.uris)
			}
		}
		if len(req.uris) > bound {
			t.Fatalf("accepted %d URIs, more than the bound %d", len(req.uris), bound)
		}
		seen := map[string]bool{}
		for _, uri := range req.uris {
			if uri == "" || seen[uri] {
				t.Fatalf("URIs %q hold an empty or repeated one", req.uris)
			}
			seen[uri] = true
		}
		var plain struct {
			Params struct {
				Notifications struct {
					ResourceSubscriptions []string `json:"resourceSubscriptions"`
				} `json:"notifications"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &plain) != nil {
			return
		}
		list := plain.Params.Notifications.ResourceSubscriptions
		if len(list) > bound {
			if err == nil {
				t.Fatalf("encoding/json reads %d URIs, past the bound %d, and the parser accepted %q", len(list), bound, req.uris)
			}
			return
		}
		var want []string
		for _, uri := range list {
			if uri != "" && !slices.Contains(want, uri) {
				want = append(want, uri)
			}
		}
		if err != nil || !slices.Equal(req.uris, want) {
			t.Fatalf("parsed %q (%v), encoding/json reads %q", req.uris, err, want)
		}
	})
}

// listenBody is a subscriptions/listen of protocol 2026-07-28 asking for uris.
func listenBody(id int, uris []string) string {
	list, _ := json.Marshal(uris)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}},`+
		`"notifications":{"resourceSubscriptions":%s}}}`, id, list)
}

// manyURIs is n distinct URIs.
func manyURIs(n int) []string {
	uris := make([]string, n)
	for i := range uris {
		uris[i] = fmt.Sprintf("u:%d", i)
	}
	return uris
}
