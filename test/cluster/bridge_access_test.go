//go:build cluster

package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// bridgeCallerScript POSTs an initialize to $MCP_URL three times, with no Authorization,
// with a guessed token and with $BRIDGE_TOKEN, and writes what each got to the
// termination message: an HTTP status, or "ERR …" when the connection failed (which is
// what a NetworkPolicy that is enforced looks like).
const bridgeCallerScript = `
import { writeFileSync } from "node:fs";
const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "stranger", version: "0" } } });
const said = [];
for (const auth of ["", "Bearer guessed-guessed-guessed-guessed-guessed", "Bearer " + process.env.BRIDGE_TOKEN]) {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (auth) headers.authorization = auth;
  try {
    const r = await fetch(process.env.MCP_URL, { method: "POST", headers, body, signal: AbortSignal.timeout(10000) });
    said.push(String(r.status));
  } catch (e) {
    said.push("ERR");
  }
}
writeFileSync("/dev/termination-log", said.join(" "));
process.exit(0);
`

// R8 on the node: a stdio bridge serves only callers with its token. A pod of another
// namespace that calls the bridge's Service without the token, or with a guessed one, is
// refused (401; or not connected at all where a NetworkPolicy implementation enforces the
// bridge's policy), while the operator's own handshake, which sends the token, makes the
// import Ready. The token is the only difference: the same pod with it is served (unless
// the policy is enforced).
func TestStdioBridgeRefusesAPodOfAnotherNamespaceWithoutItsToken(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	allowEverythingIn(t, ctx, ns)
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport: cantusv1alpha1.ImportTransportStdio,
			Stdio:     &cantusv1alpha1.StdioSource{Image: everythingImage, Command: []string{"node", everythingEntry}, Args: []string{"stdio"}},
		},
	}
	if err := k8s.Create(ctx, imp); err != nil {
		t.Fatalf("creating the RemoteToolImport: %v", err)
	}
	// The operator's handshake went through the bridge with its token.
	imp = waitImportReady(t, ctx, client.ObjectKeyFromObject(imp))
	token := bridgeToken(t, ctx, imp)
	for _, c := range imp.Status.Conditions {
		if strings.Contains(c.Message, token) {
			t.Errorf("condition %s shows the bridge's token", c.Type)
		}
	}
	var np networkingv1.NetworkPolicy
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: workload.BridgeName(imp)}, &np); err != nil {
		t.Errorf("the bridge has no NetworkPolicy: %v", err)
	}

	stranger := restrictedNamespace(t, ctx)
	pod := agentPod(stranger, "stranger", "default", "unused.example", imp.Status.BridgeURL, bridgeCallerScript)
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "BRIDGE_TOKEN", Value: token})
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("creating the pod in another namespace: %v", err)
	}
	said := strings.Fields(agentSaid(t, ctx, stranger, pod.Name))
	if len(said) != 3 {
		t.Fatalf("the pod said %q, want three answers", said)
	}
	t.Logf("from namespace %s: no token → %s, a guessed token → %s, the token → %s", stranger, said[0], said[1], said[2])
	for i, what := range []string{"no token", "a guessed token"} {
		if said[i] != "401" && said[i] != "ERR" {
			t.Errorf("with %s the bridge answered %s, want 401 (or no connection)", what, said[i])
		}
	}
	switch {
	case said[2] == "200" && said[0] == "401":
		t.Log("the node enforces no NetworkPolicy: the token alone kept the stranger out")
	case said[2] == "ERR" && said[0] == "ERR" && said[1] == "ERR":
		t.Log("the bridge's NetworkPolicy is enforced: the stranger could not connect at all, token or not")
	default:
		t.Errorf("the answers %q are neither the token's nor the policy's doing", said)
	}

	// A SkillServer that imports the bridge is admitted, by the policy and with the token
	// its gateway reads from the bridge's Secret.
	gw := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "importer", Namespace: ns},
		Spec:       cantusv1alpha1.SkillServerSpec{Imports: []cantusv1alpha1.SkillImport{{Name: imp.Name, Include: []string{"echo"}}}},
	}
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatalf("creating the gateway SkillServer: %v", err)
	}
	gw = waitReady(t, ctx, client.ObjectKeyFromObject(gw))
	if got, err := callTool(ctx, mcpClient(t, ctx, serviceURL(t, ctx, gw)), "echo", map[string]any{"message": "from the importer"}); err != nil || got != "Echo: from the importer" {
		t.Errorf("echo through the importing gateway: %q, %v", got, err)
	}

	// From this host (whose root processes a NetworkPolicy implementation lets through,
	// for the kubelet's probes): 401 without the token, served with it.
	if _, err := bridgeClient(ctx, imp.Status.BridgeURL, ""); !errors.Is(err, transport.ErrAuthorizationRequired) {
		t.Errorf("an initialize without the token from the host: %v, want 401", err)
	}
	c, err := bridgeClient(ctx, imp.Status.BridgeURL, token)
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	defer c.Close()
	if got, err := callTool(ctx, c, "echo", map[string]any{"message": "with the token"}); err != nil || got != "Echo: with the token" {
		t.Errorf("echo with the token: %q, %v", got, err)
	}
}

// bridgeToken reads the token of the import's bridge from its Secret, as an admin may.
func bridgeToken(t *testing.T, ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) string {
	t.Helper()
	var secret corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: workload.BridgeName(imp)}, &secret); err != nil {
		t.Fatalf("the bridge's Secret: %v", err)
	}
	token := string(secret.Data[render.BridgeTokenKey])
	if token == "" {
		t.Fatalf("the bridge's Secret has no %s", render.BridgeTokenKey)
	}
	return token
}

// bridgeClient initializes an MCP client of a bridge, sending token when it is not empty.
func bridgeClient(ctx context.Context, url, token string) (*mcpclient.Client, error) {
	var opts []transport.StreamableHTTPCOption
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		return nil, err
	}
	c := mcpclient.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-06-18"
	req.Params.ClientInfo = mcp.Implementation{Name: "cluster-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
