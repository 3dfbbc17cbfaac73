package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

func rawEntries(format string, n int, args ...func(i int) any) []json.RawMessage {
	out := make([]json.RawMessage, 0, n)
	for i := range n {
		vals := make([]any, 0, len(args))
		for _, a := range args {
			vals = append(vals, a(i))
		}
		out = append(out, json.RawMessage(fmt.Sprintf(format, vals...)))
	}
	return out
}

// TestContentStatusBounds: the worst a remote can list (a thousand resources with
// large descriptions, a huge definition, a huge URI) is recorded within the stated
// bounds, and the status says what it left out; the counts stay the remote's.
func TestContentStatusBounds(t *testing.T) {
	long := strings.Repeat("d", 8<<10)
	id := func(i int) any { return i }
	content := mcpclient.Content{
		Resources: rawEntries(`{"uri":"file:///r/%d","name":"r","description":%q}`, cantusv1alpha1.MaxDiscoveredContentItems, id, func(int) any { return long }),
		Prompts: append(rawEntries(`{"name":"p%d"}`, 1, id),
			json.RawMessage(`{"name":"huge","arguments":[{"name":"x","description":"`+strings.Repeat("a", 20<<10)+`"}]}`)),
		ResourceTemplates: []json.RawMessage{json.RawMessage(`{"uriTemplate":"x://` + strings.Repeat("u", 3<<10) + `/{id}","name":"t"}`)},
	}
	prompts, resources, templates, _, truncated := statusContent(content)
	if !truncated {
		t.Error("want truncated")
	}
	if len(prompts) != 2 || prompts[1].content.Definition != nil || !contains(prompts[1].content.Clipped, "definition") {
		t.Errorf("the 20 KiB prompt definition must be left out and named: %+v", prompts[1].content.Clipped)
	}
	if prompts[0].content.Definition == nil || prompts[0].content.Digest == "" {
		t.Error("a small prompt keeps its definition and digest")
	}
	if len(resources) == 0 || len(resources) >= cantusv1alpha1.MaxDiscoveredContentItems {
		t.Errorf("want some, not all, resources recorded; got %d", len(resources))
	}
	size, withDefs := 0, 0
	for _, r := range resources {
		if len(r.content.Description) > maxRemoteDescriptionBytes || !contains(r.content.Clipped, "description") {
			t.Fatalf("description not clipped: %d bytes, clipped %v", len(r.content.Description), r.content.Clipped)
		}
		size += len(r.key) + len(r.content.Name) + len(r.content.Description) + len(r.content.Digest)
		if r.content.Definition != nil {
			size += len(r.content.Definition.Raw)
			withDefs++
		}
	}
	if withDefs == 0 || withDefs == len(resources) {
		t.Errorf("%d of %d resources with definitions: want the first ones only", withDefs, len(resources))
	}
	for _, e := range append(prompts, templates...) {
		size += len(e.key) + len(e.content.Name) + len(e.content.Description) + len(e.content.Digest)
		if e.content.Definition != nil {
			size += len(e.content.Definition.Raw)
		}
	}
	if size > maxStatusContentListBytes {
		t.Errorf("the three lists hold %d bytes, over the bound %d", size, maxStatusContentListBytes)
	}

	// A URI template over the clip limit, alone, is clipped and named, its definition
	// kept whole.
	_, _, templates, _, _ = statusContent(mcpclient.Content{ResourceTemplates: content.ResourceTemplates})
	if len(templates) != 1 || len(templates[0].key) > maxRemoteURIBytes || !contains(templates[0].content.Clipped, "uriTemplate") ||
		templates[0].content.Definition == nil {
		t.Errorf("template %d bytes, clipped %v", len(templates[0].key), templates[0].content.Clipped)
	}

	imp := &cantusv1alpha1.RemoteToolImport{}
	setContentDiscovered(imp, &mcpclient.Result{Capabilities: []string{"resources", "prompts"}, Content: content}, nil)
	if imp.Status.ResourceCount != int32(cantusv1alpha1.MaxDiscoveredContentItems) || imp.Status.PromptCount != 2 || !imp.Status.ContentTruncated {
		t.Errorf("counts %d/%d, truncated %v", imp.Status.ResourceCount, imp.Status.PromptCount, imp.Status.ContentTruncated)
	}
	raw, _ := json.Marshal(imp.Status.RemoteContentStatus)
	if len(raw) > 512<<10 {
		t.Errorf("the content status is %d bytes as JSON", len(raw))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSetContentDiscovered: a tools-only remote keeps the catalog digest it always had
// and gets no content condition; content is recorded with per-item digests, filtered,
// and changes are named; a failed listing keeps that kind's earlier entries.
func TestSetContentDiscovered(t *testing.T) {
	tools := []mcpclient.Tool{{Name: "a", Raw: json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`)}}
	imp := &cantusv1alpha1.RemoteToolImport{}
	setContentDiscovered(imp, &mcpclient.Result{Capabilities: []string{"tools"}, Tools: tools}, tools)
	if imp.Status.CatalogDigest != mcpclient.Digest(tools) {
		t.Error("a tools-only import must keep catalogDigest = Digest(tools)")
	}
	if apimeta.FindStatusCondition(imp.Status.Conditions, cantusv1alpha1.ConditionContentDiscovered) != nil {
		t.Error("a remote announcing no content gets no ContentDiscovered condition")
	}

	imp.Spec.Prompts = &cantusv1alpha1.ToolFilter{Exclude: []string{"secret_*"}}
	caps := []string{"tools", "prompts", "resources"}
	first := mcpclient.Content{
		Prompts:   []json.RawMessage{json.RawMessage(`{"name":"greet"}`), json.RawMessage(`{"name":"secret_x"}`)},
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"file:///a","name":"a"}`), json.RawMessage(`{"uri":"file:///b","name":"b"}`)},
	}
	setContentDiscovered(imp, &mcpclient.Result{Capabilities: caps, Content: first}, tools)
	if imp.Status.PromptCount != 1 || imp.Status.Prompts[0].Name != "greet" || imp.Status.ResourceCount != 2 {
		t.Fatalf("status %+v", imp.Status.RemoteContentStatus)
	}
	want, _ := definition.ResourceKind.Digest(first.Resources[0])
	if imp.Status.Resources[0].Digest != want || imp.Status.CatalogDigest == mcpclient.Digest(tools) {
		t.Errorf("digest %s want %s; catalog %s", imp.Status.Resources[0].Digest, want, imp.Status.CatalogDigest)
	}
	if c := apimeta.FindStatusCondition(imp.Status.Conditions, cantusv1alpha1.ConditionContentDiscovered); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition %+v", c)
	}
	catalog := imp.Status.CatalogDigest

	second := mcpclient.Content{
		Prompts:   first.Prompts,
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"file:///a","name":"a","description":"now described"}`), json.RawMessage(`{"uri":"file:///c","name":"c"}`)},
	}
	note := setContentDiscovered(imp, &mcpclient.Result{Capabilities: caps, Content: second}, tools)
	if note != "resources: added file:///c, removed file:///b, changed file:///a" {
		t.Errorf("note %q", note)
	}

	failed := mcpclient.Content{Prompts: first.Prompts, Failed: map[string]string{"resources/list": "server refused resources/list"}}
	setContentDiscovered(imp, &mcpclient.Result{Capabilities: caps, Content: failed}, tools)
	if imp.Status.ResourceCount != 2 || imp.Status.Resources[1].URI != "file:///c" {
		t.Errorf("a failed listing keeps the earlier resources: %+v", imp.Status.Resources)
	}
	c := apimeta.FindStatusCondition(imp.Status.Conditions, cantusv1alpha1.ConditionContentDiscovered)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "server refused resources/list") {
		t.Errorf("condition %+v", c)
	}
	setContentDiscovered(imp, &mcpclient.Result{Capabilities: caps, Content: first}, tools)
	if imp.Status.CatalogDigest != catalog {
		t.Error("the same content must give the same catalog digest again")
	}

	// Skills: named and described by their frontmatter, filtered by skill path.
	imp.Spec.Skills = &cantusv1alpha1.ToolFilter{Exclude: []string{"acme/internal"}}
	withSkills := first
	withSkills.Skills = []json.RawMessage{
		json.RawMessage(`{"uri":"skill://acme/refunds/SKILL.md","frontmatter":{"name":"refunds","description":"Refund orders"},"resources":[]}`),
		json.RawMessage(`{"uri":"skill://acme/internal/SKILL.md","frontmatter":{"name":"internal","description":"x"},"resources":[]}`),
	}
	note = setContentDiscovered(imp, &mcpclient.Result{Capabilities: caps, Extensions: []string{definition.SkillsExtension}, Content: withSkills}, tools)
	if imp.Status.SkillCount != 1 || imp.Status.Skills[0].Name != "refunds" || imp.Status.Skills[0].Description != "Refund orders" ||
		imp.Status.Skills[0].URI != "skill://acme/refunds/SKILL.md" {
		t.Errorf("skills %+v", imp.Status.Skills)
	}
	if want, _ := definition.SkillKind.Digest(withSkills.Skills[0]); imp.Status.Skills[0].Digest != want {
		t.Errorf("skill digest %s, want %s", imp.Status.Skills[0].Digest, want)
	}
	if note != "skills: added skill://acme/refunds/SKILL.md" {
		t.Errorf("note %q", note)
	}
	if imp.Status.CatalogDigest == catalog {
		t.Error("the same content must give the same catalog digest again")
	}
}
