//go:build cluster

package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// skillReaderScript loads the server's Agent Skills as an agent would with the
// TypeScript SDK's client: it checks that the server declares the Skills extension,
// lists the skills (skills/list), reads every file of each entry with resources/read,
// and checks each file's sha256 digest and size against the entry. It writes
// "SKILL <uri> <file>=<digest> …" per skill, or "ERROR …", to the termination message.
const skillReaderScript = `
import { Client } from "/opt/everything/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StreamableHTTPClientTransport } from "/opt/everything/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";
import { ResultSchema } from "/opt/everything/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
const client = new Client({ name: "skill-reader", version: "0" });
let said;
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(process.env.MCP_URL)));
  if (!client.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/skills"]) {
    throw new Error("the server does not declare io.modelcontextprotocol/skills: " + JSON.stringify(client.getServerCapabilities()));
  }
  const listed = await client.request({ method: "skills/list", params: {} }, ResultSchema);
  const lines = [];
  for (const skill of listed.skills) {
    const files = [];
    for (const r of skill.resources) {
      const read = await client.readResource({ uri: r.uri });
      const c = read.contents[0];
      const bytes = c.text !== undefined ? Buffer.from(c.text, "utf8") : Buffer.from(c.blob, "base64");
      const digest = "sha256:" + createHash("sha256").update(bytes).digest("hex");
      if (digest !== r.digest || bytes.length !== r.size) {
        throw new Error(r.uri + " read " + bytes.length + " bytes with " + digest + ", listed " + r.size + " with " + r.digest);
      }
      files.push(r.uri.slice(skill.uri.length - "SKILL.md".length) + "=" + digest);
    }
    lines.push("SKILL " + skill.uri + " " + files.sort().join(" "));
  }
  said = lines.join("\n");
} catch (e) {
  said = "ERROR " + e.message;
}
writeFileSync("/dev/termination-log", said);
process.exit(0);
`

// Issue 22 on a real node: an Agent Skill published as a labelled ConfigMap is served by
// the adapter pods (from the operator's content ConfigMaps they mount) and loaded through
// the Service by the TypeScript SDK's client, in a pod: the extension is declared, the
// skill is listed at its path, and every file read has the bytes the ConfigMap holds and
// the digest the listing gives.
func TestAgentPodLoadsAnAgentSkillThroughTheService(t *testing.T) {
	ctx := testContext(t)
	ns := restrictedNamespace(t, ctx)
	files := map[string]string{
		"SKILL.md": "---\nname: shelving\ndescription: Shelve returned books in call-number order.\n---\nRead references/ORDER.md first.\n",
		"order.md": "# Call-number order\n\nClass, then cutter, then year.\n",
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shelving", Namespace: ns, Labels: map[string]string{cantusv1alpha1.ContentLabel: "true"}},
		Data:       files,
	}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatalf("creating the skill's ConfigMap: %v", err)
	}
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "shelf", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			AgentSkills: []cantusv1alpha1.AgentSkill{{
				Name: "shelving", Path: "library",
				ConfigMap: &cantusv1alpha1.SkillConfigMapSource{Name: cm.Name, Items: []cantusv1alpha1.SkillFileItem{
					{Key: "SKILL.md", Path: "SKILL.md"}, {Key: "order.md", Path: "references/ORDER.md"},
				}},
			}},
		},
	}
	if err := k8s.Create(ctx, ss); err != nil {
		t.Fatalf("creating the SkillServer: %v", err)
	}
	ss = waitReady(t, ctx, client.ObjectKeyFromObject(ss))
	if len(ss.Status.AgentSkills) != 1 || ss.Status.AgentSkills[0].URI != "skill://library/shelving/SKILL.md" {
		t.Fatalf("status.agentSkills = %+v, want the one skill at skill://library/shelving/SKILL.md", ss.Status.AgentSkills)
	}

	if err := k8s.Create(ctx, agentPod(ns, "skill-reader", "default", "unused.example", serviceURL(t, ctx, ss), skillReaderScript)); err != nil {
		t.Fatalf("creating the reader pod: %v", err)
	}
	said := agentSaid(t, ctx, ns, "skill-reader")
	want := fmt.Sprintf("SKILL skill://library/shelving/SKILL.md SKILL.md=%s references/ORDER.md=%s", digestOf(files["SKILL.md"]), digestOf(files["order.md"]))
	if strings.TrimSpace(said) != want {
		t.Errorf("the SDK client said\n  %q\nwant\n  %q", said, want)
	}
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
