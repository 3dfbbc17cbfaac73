//go:build cluster

package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
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
	ctx := testkit.Context(t, clusterTestTimeout)
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

// skillImage is the content-only image hack/test-images.sh builds from
// testdata/skill-image with hack/image -content and imports into the node.
const skillImage = "cantus.local/skill-cataloguing:1"

// Issue 22 on a real node: an Agent Skill published as an OCI image is mounted into the
// adapter pods as a Kubernetes image volume (containerd 2), read and checked by the
// adapter, and loaded through the Service by the TypeScript SDK's client in a pod: every
// file (a binary one included) has the bytes of the image and the digest the listing
// gives, and status.agentSkills shows the manifest digest of those files (learned from
// the pods, since the operator cannot read the image). A skill of the same image that
// breaks a rule (its frontmatter name is not its directory's) is left out by the adapter,
// and the operator says so: Verified=False, ImageSkillsLeftOut.
func TestAgentPodLoadsAnAgentSkillFromAnImageVolume(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	ns := restrictedNamespace(t, ctx)
	allowImageIn(t, ctx, ns, "cantus.local/skill-cataloguing")
	imageSkill := func(name, folder string) cantusv1alpha1.AgentSkill {
		return cantusv1alpha1.AgentSkill{Name: name, Path: "library", Image: &cantusv1alpha1.SkillImageSource{
			Reference: skillImage, PullPolicy: corev1.PullNever, Path: "skills/" + folder,
		}}
	}
	good := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "catalogue", Namespace: ns},
		Spec:       cantusv1alpha1.SkillServerSpec{AgentSkills: []cantusv1alpha1.AgentSkill{imageSkill("cataloguing", "cataloguing")}},
	}
	broken := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "misnamed", Namespace: ns},
		Spec:       cantusv1alpha1.SkillServerSpec{AgentSkills: []cantusv1alpha1.AgentSkill{imageSkill("broken", "broken")}},
	}
	for _, ss := range []*cantusv1alpha1.SkillServer{good, broken} {
		if err := k8s.Create(ctx, ss); err != nil {
			t.Fatalf("creating SkillServer %s: %v", ss.Name, err)
		}
	}

	files := imageSkillFiles(t, "cataloguing")
	ss := waitReady(t, ctx, client.ObjectKeyFromObject(good))
	want := manifestDigestOf(t, "library/cataloguing", files)
	if len(ss.Status.AgentSkills) != 1 || ss.Status.AgentSkills[0].URI != "skill://library/cataloguing/SKILL.md" || ss.Status.AgentSkills[0].Digest != want {
		t.Fatalf("status.agentSkills = %+v, want the one skill at skill://library/cataloguing/SKILL.md with digest %s", ss.Status.AgentSkills, want)
	}

	if err := k8s.Create(ctx, agentPod(ns, "image-skill-reader", "default", "unused.example", serviceURL(t, ctx, ss), skillReaderScript)); err != nil {
		t.Fatalf("creating the reader pod: %v", err)
	}
	said := agentSaid(t, ctx, ns, "image-skill-reader")
	wantSaid := fmt.Sprintf("SKILL skill://library/cataloguing/SKILL.md SKILL.md=%s assets/spine-label.bin=%s references/MARC.md=%s",
		digestOf(string(files["SKILL.md"])), digestOf(string(files["assets/spine-label.bin"])), digestOf(string(files["references/MARC.md"])))
	if strings.TrimSpace(said) != wantSaid {
		t.Errorf("the SDK client said\n  %q\nwant\n  %q", said, wantSaid)
	}

	verified := waitVerifiedReason(t, ctx, client.ObjectKeyFromObject(broken), cantusv1alpha1.ReasonImageSkillsLeftOut)
	if !strings.Contains(verified.Message, "skill://library/broken/SKILL.md") {
		t.Errorf("Verified says %q, want it to name skill://library/broken/SKILL.md", verified.Message)
	}
}

// allowImageIn creates a ToolSourcePolicy that allows the image repository, for this
// namespace only.
func allowImageIn(t *testing.T, ctx context.Context, ns, repository string) {
	t.Helper()
	p := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-skill-images"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Images:            []string{repository},
		},
	}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("creating the ToolSourcePolicy: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
}

// imageSkillFiles are the files of testdata/skill-image/skills/<folder>, by path.
func imageSkillFiles(t *testing.T, folder string) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "skill-image", "skills", folder)
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// manifestDigestOf is the status digest of a skill with these files, computed from the
// test's own copy of the image's files.
func manifestDigestOf(t *testing.T, skillPath string, files map[string][]byte) string {
	t.Helper()
	frontmatter, err := adapterconfig.SkillFrontmatter(files[adapterconfig.SkillManifestFile])
	if err != nil {
		t.Fatal(err)
	}
	var list []adapterconfig.SkillFile
	for p, data := range files {
		list = append(list, adapterconfig.SkillFile{Path: p, Digest: digestOf(string(data)), Size: int64(len(data))})
	}
	return render.SkillManifestDigest(skillPath, frontmatter, list)
}

// waitVerifiedReason waits until the SkillServer's Verified condition of its current
// generation has the reason.
func waitVerifiedReason(t *testing.T, ctx context.Context, key types.NamespacedName, reason string) metav1.Condition {
	t.Helper()
	var ss cantusv1alpha1.SkillServer
	var c *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, key, &ss); err != nil {
			return false, nil
		}
		c = apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionVerified)
		return c != nil && c.Reason == reason && c.ObservedGeneration == ss.Generation, nil
	})
	if err != nil {
		t.Fatalf("skillserver %s: Verified never had reason %s: conditions %+v", key, reason, ss.Status.Conditions)
	}
	return *c
}
