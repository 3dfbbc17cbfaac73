//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// agentScript lists the server's tools with the TypeScript SDK's client (from the
// everything image), sending the token the kubelet projected, and writes what happened
// to the termination message: "TOOLS a,b" or "ERROR …".
const agentScript = `
import { Client } from "/opt/everything/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StreamableHTTPClientTransport } from "/opt/everything/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";
import { readFileSync, writeFileSync } from "node:fs";
const token = readFileSync("/var/run/secrets/cantus/token", "utf8").trim();
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL),
  { requestInit: { headers: { Authorization: "Bearer " + token } } });
const client = new Client({ name: "agent", version: "0" });
let said;
try {
  await client.connect(transport);
  const listed = await client.listTools();
  said = "TOOLS " + listed.tools.map((t) => t.name).sort().join(",");
} catch (e) {
  said = "ERROR " + e.message;
}
writeFileSync("/dev/termination-log", said);
process.exit(0);
`

// Issue 12 on a real node: an agent pod calls as its own service account. The kubelet
// projects a token for the server's audience into the pod, the SDK client sends it, and
// the adapter pods check it offline against the issuer keys the operator handed them:
// the agent sees the tool its rule allows, another account of the namespace sees none,
// and a token for another audience is refused.
func TestAgentPodCallsAsItsServiceAccount(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	for _, name := range []string{"agent", "stranger"} {
		if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatalf("creating service account %s: %v", name, err)
		}
	}
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills: []cantusv1alpha1.Skill{templateSkill("search_book", "found"), templateSkill("checkout_book", "checked out")},
			Auth:   &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Authorization: &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
				{Tools: []string{"search_*"}, ServiceAccounts: []string{ns + "/agent"}},
			}},
		},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	ss = waitReady(t, ctx, client.ObjectKeyFromObject(ss))
	url := serviceURL(t, ctx, ss)
	audience := "room." + ns + ".skillserver.cantus.dev"

	cases := []struct {
		pod, account, audience string
		want                   func(string) bool
		expect                 string
	}{
		{"agent", "agent", audience, func(s string) bool { return s == "TOOLS search_book" }, "TOOLS search_book"},
		{"stranger", "stranger", audience, func(s string) bool { return s == "TOOLS " }, "TOOLS (none)"},
		{"elsewhere", "agent", "elsewhere.example", func(s string) bool {
			return strings.HasPrefix(s, "ERROR") && strings.Contains(s, "bearer token was refused")
		}, "ERROR … the bearer token was refused …"},
	}
	for _, c := range cases {
		if err := k8s.Create(ctx, agentPod(ns, c.pod, c.account, c.audience, url, agentScript)); err != nil {
			t.Fatalf("creating pod %s: %v", c.pod, err)
		}
	}
	for _, c := range cases {
		if said := agentSaid(t, ctx, ns, c.pod); !c.want(said) {
			t.Errorf("pod %s (account %s, audience %s) said %q, want %s", c.pod, c.account, c.audience, said, c.expect)
		}
	}
}

// agentPod runs a Node script (an ES module) as account with a projected token for
// audience at /var/run/secrets/cantus/token, admitted under the restricted profile.
func agentPod(ns, name, account, audience, url, script string) *corev1.Pod {
	no, yes := false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			ServiceAccountName:           account,
			AutomountServiceAccountToken: &no,
			RestartPolicy:                corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    "agent",
				Image:   everythingImage,
				Command: []string{"node", "--input-type=module", "-e", script},
				Env:     []corev1.EnvVar{{Name: "MCP_URL", Value: url}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "mcp-token", MountPath: "/var/run/secrets/cantus", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "mcp-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", Audience: audience}}},
			}}}},
		},
	}
}

// agentSaid waits for the agent pod to finish and returns its termination message.
func agentSaid(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	var pod corev1.Pod
	var said string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return false, nil
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				said = s.State.Terminated.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s did not finish: %s", name, describePod(&pod))
	}
	return said
}

func describePod(p *corev1.Pod) string {
	return fmt.Sprintf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
}
