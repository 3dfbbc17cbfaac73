package integration

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	. "github.com/onsi/gomega"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/test/testenv/dualera"
)

// eraClient is an initialized mcp-go client of url: unpinned (protocol 2026-07-28,
// server/discover) when protocol is empty, else pinned to it.
func eraClient(t *testing.T, ctx context.Context, url, protocol string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if protocol != "" {
		opts = append(opts, client.WithProtocolVersion(protocol))
	}
	c := client.NewClient(tr, opts...)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: protocol,
		ClientInfo: mcp.Implementation{Name: "cantus-test", Version: "0"}}}); err != nil {
		t.Fatalf("initialize (protocol %q): %v", protocol, err)
	}
	return c
}

// eraListing maps each tool c is listed to its description.
func eraListing(ctx context.Context, c *client.Client) (map[string]string, error) {
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool.Description
	}
	return out, nil
}

// A gateway SkillServer re-exporting a dual-era remote, as the operator renders it
// from the import's status, lists each caller what the remote lists to its era: a
// 2026-07-28 caller sees (and calls) the tool of that era only and the 2026-07-28
// description of a tool described otherwise in each era; a 2025-11-25 caller sees
// neither.
func TestGatewayOfADualEraImportListsEachEraItsOwnTools(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)
	startGatewayManager(t)
	remote := dualera.Start(t, dualera.Both)
	imp := kubekit.NewImport(ns, "dual", remote.URL)
	imp.Spec.Timeout = cantusv1alpha1.DurationFrom(10 * time.Second)
	g.Expect(k8sClient.Create(ctx, imp)).To(Succeed())
	served := readyGateway(t, ctx, ns, "gateway", cantusv1alpha1.SkillImport{Name: "dual", Prefix: "d_"})

	modern := eraClient(t, ctx, served.Status.URL, "")
	listed, err := eraListing(ctx, modern)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveKey("d_" + dualera.ToolModernOnly))
	g.Expect(listed).To(HaveKeyWithValue("d_"+dualera.ToolVersioned, dualera.ModernDescription))
	res, err := modern.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "d_" + dualera.ToolModernOnly, Arguments: map[string]any{}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsError).To(BeFalse())
	g.Expect(mcpkit.ResultText(res)).To(Equal("modern"))

	legacy := eraClient(t, ctx, served.Status.URL, mcp.ProtocolVersion20251125)
	listed, err = eraListing(ctx, legacy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).NotTo(HaveKey("d_" + dualera.ToolModernOnly))
	g.Expect(listed).To(HaveKeyWithValue("d_"+dualera.ToolVersioned, dualera.LegacyDescription))
	g.Expect(listed).To(HaveKey("d_" + dualera.ToolEcho))
}
