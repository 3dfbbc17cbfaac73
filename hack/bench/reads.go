package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The reads comparisons: a remote's resource and prompt re-exported through a gateway
// (imported content, as a SkillServer with spec.imports renders it) against the same
// read and get made on the remote directly; with -hop, the read through a bare reverse
// proxy too. The remote is an adapter serving a 64 KiB text resource from its content
// folder and a prompt whose one message is a template.

const (
	// readURI is the remote's resource, served under the same URI by the gateway (an
	// import keeps resources' URIs).
	readURI = "docs://library/reading-guide.md"
	// promptName is the remote's prompt; gatewayPromptName its name on the gateway.
	promptName        = "greet_reader"
	gatewayPromptName = "remote_greet_reader"
	promptTemplate    = "Hello, {{ .name }}! Welcome to the library."
)

// readTargets bound gateway/direct for reads as for calls.
var readTargets = gatewayTargets

// readsComparisons measures resources/read and prompts/get through a gateway against
// the same requests made on its remote directly and, with hop, the read through a bare
// reverse proxy against the direct read.
func readsComparisons(hop bool, token string, newTarget func(name, url, tool string) target) (_ []comparison, _ func(), err error) {
	remoteURL, gatewayURL, started, err := startRemoteAndGateway(token,
		func() (string, func(), error) { return startContentRemote(token) }, startContentGateway)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			started.run()
		}
	}()

	reader := func(name, url string) target {
		t := newTarget(name, url, "")
		t.uri = readURI
		return t
	}
	prompter := func(name, url, prompt string) target {
		t := newTarget(name, url, "")
		t.prompt = prompt
		return t
	}
	comparisons := []comparison{{
		name: onlyReads,
		title: fmt.Sprintf("gateway/direct: resources/read of a %d KiB text resource re-exported by the gateway, against the same read on the remote directly",
			skillFileSize>>10),
		a:       reader(nameGateway, gatewayURL),
		b:       reader(nameDirect, remoteURL),
		targets: readTargets,
	}, {
		name: onlyReads,
		title: fmt.Sprintf("gateway/direct: prompts/get %s on the gateway, re-exported from the remote's %s, against the same get on the remote directly",
			gatewayPromptName, promptName),
		a:       prompter(nameGateway, gatewayURL, gatewayPromptName),
		b:       prompter(nameDirect, remoteURL, promptName),
		targets: readTargets,
	}}
	if hop {
		proxyURL, stopProxy, err := startHop(remoteURL)
		if err != nil {
			return nil, nil, err
		}
		started = append(started, stopProxy)
		comparisons = append(comparisons, comparison{
			name:    nameHop,
			title:   "hop/direct: the same resources/read through a bare HTTP reverse proxy (no MCP work) against the direct read: the extra HTTP hop alone",
			a:       reader(nameHop, proxyURL),
			b:       reader(nameDirect, remoteURL),
			targets: readTargets,
		})
	}
	return comparisons, started.run, nil
}

// startContentRemote serves the resource (the 64 KiB text, from a content folder named
// by digest as the kubernetes runtime mounts it) and the prompt.
func startContentRemote(token string) (string, func(), error) {
	folder, err := newContentFolder()
	if err != nil {
		return "", nil, err
	}
	digest, err := folder.add(skillFileText)
	if err != nil {
		folder.remove()
		return "", nil, err
	}
	return folder.serve(nameRemote, token, &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "cantus-bench-" + nameRemote, Version: "0.0.0"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Stateless: true,
		Resources: []adapterconfig.Resource{{
			URI: readURI, Name: "reading-guide.md", MimeType: "text/markdown",
			Content: &adapterconfig.ContentRef{Digest: digest, Size: int64(len(skillFileText))},
		}},
		Prompts: []adapterconfig.Prompt{{
			Name: promptName, Description: toolDesc,
			Arguments: []adapterconfig.PromptArgument{{Name: "name", Required: true}},
			Messages: []adapterconfig.PromptMessage{{
				Role: adapterconfig.RoleUser, Content: adapterconfig.PromptContent{Type: adapterconfig.ContentText, Text: promptTemplate},
			}},
		}},
	})
}

// startContentGateway serves the remote's resource and prompt re-exported, as the
// controller renders imported content: the remote's list entries as definitions, the
// prompt under a prefixed name. headerFile and token are as startGateway's.
func startContentGateway(remoteURL, headerFile, token string) (string, func(), error) {
	backend := func(remoteName string) adapterconfig.RemoteBackend {
		return remoteBackend(remoteURL, headerFile, remoteName)
	}
	resource, _ := json.Marshal(map[string]string{"uri": readURI, "name": "reading-guide.md", "mimeType": "text/markdown"})
	prompt, _ := json.Marshal(map[string]any{"name": promptName, "description": toolDesc,
		"arguments": []map[string]any{{"name": "name", "required": true}}})
	return serveConfig(nameGateway, token, &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "cantus-bench-" + nameGateway, Version: "0.0.0"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Stateless: true,
		Imported: &adapterconfig.ImportedContent{
			Resources: []adapterconfig.ImportedItem{{Key: readURI, Definition: resource, Remote: backend("")}},
			Prompts:   []adapterconfig.ImportedItem{{Key: gatewayPromptName, Definition: prompt, Remote: backend(promptName)}},
		},
	})
}

// getPromptOnce gets the prompt and checks that it answered the rendered greeting.
func getPromptOnce(c *client.Client, req mcp.GetPromptRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.GetPrompt(ctx, req)
	if err != nil {
		return err
	}
	if len(res.Messages) != 1 {
		return fmt.Errorf("get %s: %d messages, want 1", req.Params.Name, len(res.Messages))
	}
	text, ok := mcp.AsTextContent(res.Messages[0].Content)
	if !ok || text.Text != wantText {
		return fmt.Errorf("get %s: %v, want %q", req.Params.Name, res.Messages[0].Content, wantText)
	}
	return nil
}
