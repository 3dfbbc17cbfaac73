package controller

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

// Imports of @modelcontextprotocol/server-everything, a server nobody here wrote: its
// tools land in status with the schemas the official TypeScript SDK client lists.
func TestImportOfServerEverything(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	allowLoopback(t, ns)
	for _, tc := range []struct {
		transport cantusv1alpha1.ImportTransport
		path      string
	}{
		{cantusv1alpha1.ImportTransportStreamableHTTP, "/mcp"},
		{cantusv1alpha1.ImportTransportSSE, "/sse"},
	} {
		t.Run(string(tc.transport), func(t *testing.T) {
			g := NewWithT(t)
			base := peers.StartServerEverything(t, ctx, string(tc.transport))
			imp := newImport(ns, "everything-"+string(tc.transport), base+tc.path)
			imp.Spec.Transport = tc.transport
			imp.Spec.Timeout = &metav1.Duration{Duration: 20_000_000_000}
			got := reconcileImport(t, importReconciler(), imp)
			ready := importCondition(got, cantusv1alpha1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			g.Expect(got.Status.ServerInfo.Name).NotTo(BeEmpty())

			listed := peers.TSClient(t, ctx, peers.TSClientOptions{URL: base + tc.path, Transport: string(tc.transport)})
			g.Expect(got.Status.Tools).To(HaveLen(len(listed.Tools)))
			want := map[string]json.RawMessage{}
			for _, tool := range listed.Tools {
				want[tool.Name] = tool.InputSchema
			}
			for _, tool := range got.Status.Tools {
				g.Expect(want).To(HaveKey(tool.Name))
				g.Expect(tool.InputSchema.Raw).To(MatchJSON(want[tool.Name]), "schema of %s passes through unchanged", tool.Name)
			}
		})
	}
}
