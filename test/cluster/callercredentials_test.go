//go:build cluster

package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// Issue 36 on a real node: a gateway sends each caller's own key to the remote, from a
// per-caller Secret, and a new Secret reaches the running gateway pod through the
// kubelet's Secret volume sync, without a rollout.
//
// The remote is a SkillServer that checks service-account tokens for its own audience and
// whose rules let remote-alice call alice_only and remote-alice, remote-bob (and the
// import's prober) call anyone. The gateway's callers alice, bob and carol present tokens
// for the gateway's audience; their per-caller Secrets hold tokens of remote-alice and
// remote-bob for the remote's. So alice reaches alice_only, bob is refused by the
// remote's rules (two identities at the remote, not one shared key), carol is told which
// Secret to create, and once it exists her calls go through.
func TestCallerCredentials_PerCallerKeysOnTheNode(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	for _, name := range []string{"remote-alice", "remote-bob", "prober", "alice", "bob", "carol"} {
		if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatalf("creating service account %s: %v", name, err)
		}
	}

	remote := createCallerCheckingRemote(t, ctx, ns)
	remoteAudience := render.DefaultServiceAccountAudience(remote)
	// The node has no cluster DNS: the import names the remote's Service by its ClusterIP,
	// which the manager's pod and the gateway's reach through kube-proxy.
	remoteURL := serviceURL(t, ctx, remote)
	allowHostIn(t, ctx, ns, strings.Split(strings.TrimPrefix(remoteURL, "http://"), ":")[0])

	tokens := map[string]string{
		"prober":       serviceAccountToken(t, ctx, ns, "prober", remoteAudience),
		"remote-alice": serviceAccountToken(t, ctx, ns, "remote-alice", remoteAudience),
		"remote-bob":   serviceAccountToken(t, ctx, ns, "remote-bob", remoteAudience),
		"carol's key":  serviceAccountToken(t, ctx, ns, "remote-bob", remoteAudience),
	}
	createSecret(t, ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "remote-probe", Namespace: ns},
		StringData: map[string]string{"token": "Bearer " + tokens["prober"]},
	})
	createSecret(t, ctx, callerSecret(ns, "alice", tokens["remote-alice"]))
	createSecret(t, ctx, callerSecret(ns, "bob", tokens["remote-bob"]))

	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns},
		Spec: cantusv1alpha1.RemoteToolImportSpec{
			Transport:         cantusv1alpha1.ImportTransportStreamableHTTP,
			URL:               remoteURL,
			Headers:           []cantusv1alpha1.HeaderFromSecret{{Name: "Authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "remote-probe", Key: "token"}}},
			CallerCredentials: &cantusv1alpha1.CallerCredentials{PerCallerSecret: &cantusv1alpha1.PerCallerSecret{}},
		},
	}
	if err := k8s.Create(ctx, imp); err != nil {
		t.Fatalf("creating the RemoteToolImport: %v", err)
	}
	imp = waitImportReady(t, ctx, client.ObjectKeyFromObject(imp))
	if got := discoveredToolNames(imp); len(got) != 2 {
		t.Fatalf("the import's probe (as prober) discovered %v, want alice_only and anyone", got)
	}

	gw := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Auth:    &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Imports: []cantusv1alpha1.SkillImport{{Name: "remote", Prefix: "g_"}},
		},
	}
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatalf("creating the gateway SkillServer: %v", err)
	}
	gw = waitReady(t, ctx, client.ObjectKeyFromObject(gw))
	gwURL, gwAudience := serviceURL(t, ctx, gw), render.DefaultServiceAccountAudience(gw)
	callers := map[string]*mcpclient.Client{}
	for _, name := range []string{"alice", "bob", "carol"} {
		tokens[name] = serviceAccountToken(t, ctx, ns, name, gwAudience)
		callers[name] = mcpClientWithToken(t, ctx, gwURL, tokens[name])
	}

	// alice and bob's Secrets existed before the gateway: their keys are in the pod from
	// its start.
	if got, err := callTool(ctx, callers["alice"], "g_alice_only", nil); err != nil || got != "for alice only" {
		t.Errorf("alice's g_alice_only: %q, %v; want the remote's answer %q", got, err, "for alice only")
	}
	_, err := callTool(ctx, callers["bob"], "g_alice_only", nil)
	if err == nil || !strings.Contains(err.Error(), "mcp_remote_error: not_allowed:") {
		t.Errorf("bob's g_alice_only: %v; want the remote's refusal (mcp_remote_error: not_allowed: ...), since the remote sees remote-bob", err)
	}
	if got, err := callTool(ctx, callers["bob"], "g_anyone", nil); err != nil || got != "for anyone" {
		t.Errorf("bob's g_anyone: %q, %v; want %q", got, err, "for anyone")
	}

	_, err = callTool(ctx, callers["carol"], "g_anyone", nil)
	for _, want := range []string{"caller_credentials_missing:", "namespace " + ns, cantusv1alpha1.LabelCallerCredentialsFor + "=remote", "cantus.dev/caller=serviceaccount:" + ns + "/carol", `"token"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("carol's g_anyone without a Secret: %v; want it to say %q", err, want)
		}
	}

	before := gatewayRollout(t, ctx, ns, gw.Name)
	readyFor := gatewayPodReadyFor(t, ctx, ns, gw.Name)
	created := time.Now()
	createSecret(t, ctx, callerSecret(ns, "carol", tokens["carol's key"]))
	written, served := waitCarolServed(t, ctx, ns, gw.Name, callers["carol"])
	// The kubelet updates a Secret volume when it next syncs the pod, about once a
	// minute; three runs here measured 60 s, 1 s and 71 s, the pod Ready for ~2 s each time.
	t.Logf("carol's new Secret reached the gateway pod in %s (the manager wrote %s after %s; the kubelet's Secret volume sync took the rest; the pod had been Ready for %s)",
		served.Sub(created).Round(time.Second), render.CallerKeysSecretName(gw.Name), written.Sub(created).Round(time.Second), readyFor.Round(time.Second))
	if after := gatewayRollout(t, ctx, ns, gw.Name); after != before {
		t.Errorf("the gateway rolled for carol's Secret: before %+v, after %+v; a key must reach the running pods", before, after)
	}

	requireNoTokenShown(t, ctx, ns, tokens)
}

// createCallerCheckingRemote makes the remote: a SkillServer that takes service-account
// tokens for its own audience and lets only some accounts call each tool. The prober is
// allowed both, since tools/list shows a caller only what the rules let it call.
func createCallerCheckingRemote(t *testing.T, ctx context.Context, ns string) *cantusv1alpha1.SkillServer {
	t.Helper()
	remote := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{templateSkill("alice_only", "for alice only"), templateSkill("anyone", "for anyone")},
			Auth:   &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Authorization: &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
				{Tools: []string{"alice_only"}, ServiceAccounts: []string{ns + "/remote-alice", ns + "/prober"}},
				{Tools: []string{"anyone"}, ServiceAccounts: []string{ns + "/remote-alice", ns + "/remote-bob", ns + "/prober"}},
			}},
		},
	}
	if err := k8s.Create(ctx, remote); err != nil {
		t.Fatalf("creating the remote SkillServer: %v", err)
	}
	return waitReady(t, ctx, client.ObjectKeyFromObject(remote))
}

// allowHostIn creates a ToolSourcePolicy that allows imports of host from this namespace
// only, and deletes it at the end (it is cluster-scoped).
func allowHostIn(t *testing.T, ctx context.Context, ns, host string) {
	t.Helper()
	p := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Hosts:             []string{host},
		},
	}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("creating the ToolSourcePolicy: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
}

func createSecret(t *testing.T, ctx context.Context, s *corev1.Secret) {
	t.Helper()
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatalf("creating Secret %s: %v", s.Name, err)
	}
}

// callerSecret is the per-caller Secret of service account caller for import "remote",
// as docs/caller-credentials.md describes it.
func callerSecret(ns, caller, key string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: caller + "-remote-key", Namespace: ns,
			Labels:      map[string]string{cantusv1alpha1.LabelCallerCredentialsFor: "remote"},
			Annotations: map[string]string{cantusv1alpha1.AnnotationCaller: "serviceaccount:" + ns + "/" + caller},
		},
		StringData: map[string]string{"token": key},
	}
}

// mcpClientWithToken is an initialized MCP client of url that sends token as its bearer.
func mcpClientWithToken(t *testing.T, ctx context.Context, url, token string) *mcpclient.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("starting a client of %s: %v", url, err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "cluster-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
}

// waitCarolServed polls carol's call until it succeeds, for up to three minutes (the
// kubelet syncs Secret volumes about once a minute, plus its cache's TTL), and returns
// when the manager's caller-keys Secret first held her key and when her call first went
// through.
func waitCarolServed(t *testing.T, ctx context.Context, ns, gateway string, carol *mcpclient.Client) (written, served time.Time) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if written.IsZero() {
			var keys corev1.Secret
			if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.CallerKeysSecretName(gateway)}, &keys) == nil &&
				keys.Annotations[workload.AnnotationCallerKeys] == "3" {
				written = time.Now()
			}
		}
		got, err := callTool(ctx, carol, "g_anyone", nil)
		if err != nil {
			last = err
			return false, nil
		}
		if got != "for anyone" {
			t.Errorf("carol's g_anyone: %q, want %q", got, "for anyone")
		}
		served = time.Now()
		return true, nil
	})
	if err != nil {
		t.Fatalf("carol's call did not go through within 3 minutes of her Secret (caller-keys Secret written: %v): %v", !written.IsZero(), last)
	}
	if written.IsZero() {
		written = served
	}
	return written, served
}

// rollout is what a rollout of the gateway would change: the Deployment's generation,
// its pod template, and the pods themselves.
type rollout struct {
	Generation int64
	Template   string
	Pods       string
}

func gatewayRollout(t *testing.T, ctx context.Context, ns, name string) rollout {
	t.Helper()
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &dep); err != nil {
		t.Fatalf("the gateway's Deployment: %v", err)
	}
	raw, err := json.Marshal(dep.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{workload.LabelInstance: name}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		ids = append(ids, fmt.Sprintf("%s(restarts %d)", p.Name, restarts))
	}
	return rollout{Generation: dep.Generation, Template: hex.EncodeToString(sum[:8]), Pods: strings.Join(ids, ",")}
}

// gatewayPodReadyFor is how long the gateway's (one) pod has been Ready.
func gatewayPodReadyFor(t *testing.T, ctx context.Context, ns, name string) time.Duration {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{workload.LabelInstance: name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				return time.Since(c.LastTransitionTime.Time)
			}
		}
	}
	return 0
}

// requireNoTokenShown checks that no token of the test appears in the import's or the
// gateway's status, nor in any event of the namespace.
func requireNoTokenShown(t *testing.T, ctx context.Context, ns string, tokens map[string]string) {
	t.Helper()
	var imp cantusv1alpha1.RemoteToolImport
	var gw cantusv1alpha1.SkillServer
	var events corev1.EventList
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "remote"}, &imp); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gw"}, &gw); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"the import's status": imp.Status, "the gateway's status": gw.Status, "the namespace's events": events.Items} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for whose, token := range tokens {
			if strings.Contains(string(raw), token) {
				t.Errorf("%s holds the token of %s", what, whose)
			}
		}
	}
	t.Logf("no token in the import's or the gateway's status, nor in the %d events of %s", len(events.Items), ns)
}
