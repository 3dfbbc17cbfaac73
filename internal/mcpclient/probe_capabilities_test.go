package mcpclient

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
)

// fakeLister lists, for a set of declared capabilities, the tools a server registers
// for it: base always, and each of byCapability's when that capability is declared;
// allThree only when all three are.
func fakeLister(base []string, byCapability map[string]string, allThree string) (lister, *int) {
	calls := 0
	return func(_ context.Context, caps []string) ([]Tool, error) {
		calls++
		var out []Tool
		for _, name := range base {
			out = append(out, Tool{Name: name})
		}
		for _, c := range caps {
			if name, ok := byCapability[c]; ok {
				out = append(out, Tool{Name: name})
			}
		}
		if len(caps) == 3 && allThree != "" {
			out = append(out, Tool{Name: allThree})
		}
		return out, nil
	}, &calls
}

// Each tool listed only with capabilities is mapped to the one whose declaration lists
// it, or to all of them when no single one does; tools listed without any need nothing.
func TestToolNeeds_NamesTheCapabilityEachToolIsListedFor(t *testing.T) {
	caps := RelayableCapabilities()
	list, _ := fakeLister([]string{"echo"}, map[string]string{"elicitation": "ask", "sampling": "sample", "roots": "roots"}, "everything")
	full, _ := list(context.Background(), caps)
	needs, err := toolNeeds(context.Background(), full, caps, list)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"ask": {"elicitation"}, "sample": {"sampling"}, "roots": {"roots"}, "everything": {"elicitation", "roots", "sampling"}}
	if !maps.EqualFunc(needs, want, slices.Equal) {
		t.Errorf("needs %v, want %v", needs, want)
	}
}

// A server that lists the same tools whatever the client declares is listed once more
// (declaring nothing) and nothing more; a probe that declares nothing lists nothing
// more at all.
func TestToolNeeds_ListsOnceMoreWhenNothingDependsOnCapabilities(t *testing.T) {
	list, calls := fakeLister([]string{"echo", "add"}, nil, "")
	full, _ := list(context.Background(), RelayableCapabilities())
	*calls = 0
	needs, err := toolNeeds(context.Background(), full, RelayableCapabilities(), list)
	if err != nil || needs != nil || *calls != 1 {
		t.Errorf("needs %v, err %v after %d listings; want none after one", needs, err, *calls)
	}
	if needs, _ := toolNeeds(context.Background(), full, nil, list); needs != nil || *calls != 1 {
		t.Errorf("without capabilities: needs %v after %d more listings, want none", needs, *calls-1)
	}
}

// A failed listing ends the search with its error, as any failure of the handshake does.
func TestToolNeeds_AFailedListingIsReported(t *testing.T) {
	boom := errors.New("boom")
	failing := func(context.Context, []string) ([]Tool, error) { return nil, boom }
	if _, err := toolNeeds(context.Background(), []Tool{{Name: "x"}}, RelayableCapabilities(), failing); !errors.Is(err, boom) {
		t.Errorf("err %v, want the listing's", err)
	}
}

// The eras' findings are merged per tool.
func TestMergeNeeds_UnitesEachToolsNeeds(t *testing.T) {
	got := mergeNeeds(map[string][]string{"a": {"sampling"}}, map[string][]string{"a": {"elicitation", "sampling"}, "b": {"roots"}})
	want := map[string][]string{"a": {"elicitation", "sampling"}, "b": {"roots"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("merged %v, want %v", got, want)
	}
}
