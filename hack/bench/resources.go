package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The resources comparison: resources/read of a 64 KiB file of an Agent Skill on the
// adapter (read from its content folder, as a SkillServer's pods serve it) against a
// bare mcp-go server that serves the same bytes as a text resource from memory.

const (
	skillPath     = "reading-guide"
	skillFilePath = "references/GUIDE.md"
	skillFileSize = 64 << 10
)

var (
	skillFileURI = adapterconfig.SkillURI(skillPath, skillFilePath)
	// skillFileText is markdown of exactly skillFileSize bytes.
	skillFileText = strings.Repeat("A line of the reading guide, as agents load it.\n", skillFileSize/48+1)[:skillFileSize]
)

// resourceTargets bound adapter/bare for resources/read, as for tools/call.
var resourceTargets = targets{minThroughput: 0.9, maxP99: 1.2}

func resourcesComparison(token string, newTarget func(name, url, tool string) target) (comparison, func(), error) {
	adapterURL, stopAdapter, err := startSkillAdapter(token)
	if err != nil {
		return comparison{}, nil, err
	}
	bareURL, stopBare, err := startBareResource()
	if err != nil {
		stopAdapter()
		return comparison{}, nil, err
	}
	a, b := newTarget(nameAdapter, adapterURL, ""), newTarget(nameBare, bareURL, "")
	a.uri, b.uri = skillFileURI, skillFileURI
	return comparison{
		name:    onlyResources,
		title:   fmt.Sprintf("adapter/bare: resources/read of a %d KiB skill file on the adapter and on a bare mcp-go server", skillFileSize>>10),
		a:       a,
		b:       b,
		targets: resourceTargets,
	}, stops{stopAdapter, stopBare}.run, nil
}

// startSkillAdapter serves one Agent Skill whose reference file is the 64 KiB text,
// from a content folder named by digest as the kubernetes runtime mounts it.
func startSkillAdapter(token string) (string, func(), error) {
	folder, err := newContentFolder()
	if err != nil {
		return "", nil, err
	}
	manifest := "---\nname: " + skillPath + "\ndescription: How to read the library's guide.\n---\nRead references/GUIDE.md.\n"
	var files []adapterconfig.SkillFile
	for _, f := range []struct{ path, text, mime string }{
		{adapterconfig.SkillManifestFile, manifest, "text/markdown"},
		{skillFilePath, skillFileText, "text/markdown"},
	} {
		digest, err := folder.add(f.text)
		if err != nil {
			folder.remove()
			return "", nil, err
		}
		files = append(files, adapterconfig.SkillFile{Path: f.path, Digest: digest, Size: int64(len(f.text)), MimeType: f.mime})
	}
	frontmatter, _ := json.Marshal(map[string]string{"name": skillPath, "description": "How to read the library's guide."})
	return folder.serve(nameAdapter, token, &adapterconfig.Config{
		Server:      adapterconfig.ServerInfo{Name: "cantus-bench-skills", Version: "0.0.0"},
		Transport:   adapterconfig.TransportStreamableHTTP,
		Stateless:   true,
		AgentSkills: []adapterconfig.AgentSkill{{Path: skillPath, Frontmatter: frontmatter, Files: files}},
	})
}

// startBareResource serves the same bytes with mcp-go alone: one AddResource whose
// handler returns the text it holds.
func startBareResource() (string, func(), error) {
	m := server.NewMCPServer("bare-bench", "0.0.0", server.WithResourceCapabilities(false, false))
	m.AddResource(mcp.NewResource(skillFileURI, "GUIDE.md", mcp.WithMIMEType("text/markdown")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/markdown", Text: skillFileText}}, nil
		})
	return serveBare(m)
}

// readOnce reads uri and checks that it answered the skill file's exact text.
func readOnce(c *client.Client, req mcp.ReadResourceRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.ReadResource(ctx, req)
	if err != nil {
		return err
	}
	if len(res.Contents) != 1 {
		return fmt.Errorf("read %s: %d contents, want 1", req.Params.URI, len(res.Contents))
	}
	text, ok := mcp.AsTextResourceContents(res.Contents[0])
	if !ok || text.Text != skillFileText {
		return fmt.Errorf("read %s: not the %d bytes of the skill file (%T)", req.Params.URI, skillFileSize, res.Contents[0])
	}
	return nil
}
