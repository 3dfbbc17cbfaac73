package render

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// An import's relay reaches the tools it serves, sorted, and only theirs; a stdio
// import relays nothing (its bridge shares one child among callers).
func TestReexportRelays(t *testing.T) {
	asks := readyImportOf("asks", "ask")
	quiet := readyImportOf("quiet", "tell")
	child := readyImportOf("child", "run")
	child.Spec.Transport = cantusv1alpha1.ImportTransportStdio
	child.Status.BridgeURL = "http://child-bridge.books.svc:8765/mcp"
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{
		{Name: "asks", Relay: []cantusv1alpha1.RelayedRequest{cantusv1alpha1.RelaySampling, cantusv1alpha1.RelayElicitation}},
		{Name: "quiet"},
		{Name: "child", Relay: []cantusv1alpha1.RelayedRequest{cantusv1alpha1.RelayElicitation}},
	}
	out := reexport(ss, map[string]*cantusv1alpha1.RemoteToolImport{"asks": asks, "quiet": quiet, "child": child}, nil)
	relays := map[string][]string{}
	for _, tool := range out.tools {
		relays[tool.Name] = tool.Remote.Relay
	}
	if got := relays["ask"]; !slices.Equal(got, []string{"elicitation", "sampling"}) {
		t.Errorf("ask relays %v, want [elicitation sampling]", got)
	}
	if got, ok := relays["tell"]; !ok || len(got) != 0 {
		t.Errorf("tell (an import without relay) relays %v (served %v), want nothing", got, ok)
	}
	if got, ok := relays["run"]; !ok || len(got) != 0 {
		t.Errorf("run (a stdio import) relays %v (served %v), want nothing", got, ok)
	}
}
