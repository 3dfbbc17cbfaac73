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

// A gateway's replica count reaches the adapter, which asks its callers of 2025-11-25
// only while it runs one, and reaches it without rolling the pods: scaling (kubectl
// scale, an autoscaler) is applied in place. One replica renders nothing, so the
// configs of single-replica servers stay as they were.
func TestReplicasReachTheAdapterWithoutRollingThePods(t *testing.T) {
	rendered := func(replicas int32) (*Result, error) {
		ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
		ss.Spec.Replicas = &replicas
		out, err := SkillServer(ss, Inputs{})
		return &out, err
	}
	one, err := rendered(1)
	if err != nil {
		t.Fatal(err)
	}
	three, err := rendered(3)
	if err != nil {
		t.Fatal(err)
	}
	if one.Config.Replicas != 0 || three.Config.Replicas != 3 {
		t.Errorf("replicas rendered %d and %d, want 0 (unset) and 3", one.Config.Replicas, three.Config.Replicas)
	}
	if one.Hash == three.Hash {
		t.Error("the config hash misses the replica count, so the adapter would never learn it")
	}
	if one.RolloutHash != three.RolloutHash {
		t.Error("scaling would roll the pods")
	}
}
