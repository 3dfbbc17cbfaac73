package peers

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LangChainAgentOptions drives test/mcp-peers/langchain-agent.mjs: LangChain.js
// (@langchain/mcp-adapters) loading a Search-mode server's tools and taking an agent's
// steps with them, find_tools then call_tool, in the order a model would.
type LangChainAgentOptions struct {
	// URL is the streamable HTTP endpoint, e.g. http://127.0.0.1:1234/mcp.
	URL string
	// Headers are sent with every request, e.g. {"Authorization": "Bearer x"}.
	Headers map[string]string
	// ExpectTools are the tools LangChain must load: the pins and the meta-tools.
	ExpectTools []string
	// Task is the query given to find_tools; Args the arguments call_tool passes to the
	// top result (what a model would write from its inputSchema).
	Task string
	Args any
	// Limit is find_tools' limit (default 5).
	Limit int
	// Probes are more find_tools queries whose results are reported.
	Probes []string
	// Timeout bounds each tool call (default 20s); ctx bounds the whole run.
	Timeout time.Duration
}

// LangChainAgentOutput is the JSON object langchain-agent.mjs prints.
type LangChainAgentOutput struct {
	// Tools are the names of the tools LangChain loaded, sorted.
	Tools []string `json:"tools"`
	// Found are find_tools' matches for the task, best first.
	Found []struct {
		Name   string `json:"name"`
		Reason string `json:"reason"`
	} `json:"found"`
	// Chosen is the top match, called through call_tool; ChosenSchema its inputSchema
	// as find_tools answered it; Result the call's text.
	Chosen       string          `json:"chosen"`
	ChosenSchema json.RawMessage `json:"chosenSchema"`
	Result       string          `json:"result"`
	// Probes are the names find_tools answered for each probe query.
	Probes map[string][]string `json:"probes"`
}

// FoundNames lists the names of the task's matches, best first.
func (o LangChainAgentOutput) FoundNames() []string {
	names := make([]string, 0, len(o.Found))
	for _, f := range o.Found {
		names = append(names, f.Name)
	}
	return names
}

// LangChainAgent runs langchain-agent.mjs with Node 22 (the LangChain packages want a
// current Node) and returns what it printed; any failure fails the test.
func LangChainAgent(t testing.TB, ctx context.Context, opts LangChainAgentOptions) LangChainAgentOutput {
	t.Helper()
	if opts.URL == "" || opts.Task == "" {
		t.Fatalf("peers: LangChainAgentOptions.URL and Task are required")
	}
	args := []string{filepath.Join(Dir(t), "langchain-agent.mjs"), "--url", opts.URL, "--task", opts.Task,
		"--expect-tools", strings.Join(opts.ExpectTools, ",")}
	for k, v := range opts.Headers {
		args = append(args, "--header", k+": "+v)
	}
	if opts.Args != nil {
		b, err := json.Marshal(opts.Args)
		if err != nil {
			t.Fatalf("peers: LangChainAgentOptions.Args: %v", err)
		}
		args = append(args, "--args", string(b))
	}
	if opts.Limit > 0 {
		args = append(args, "--limit", strconv.Itoa(opts.Limit))
	}
	for _, p := range opts.Probes {
		args = append(args, "--probe", p)
	}
	if opts.Timeout > 0 {
		args = append(args, "--timeout", strconv.FormatInt(opts.Timeout.Milliseconds(), 10))
	}
	r := run(ctx, Dir(t), nil, Node22(t), args...)
	if r.err != nil {
		t.Fatalf("peers: langchain-agent.mjs against %s:\n%s", opts.URL, r.describe())
	}
	var out LangChainAgentOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("peers: langchain-agent.mjs printed no JSON object: %v\n%s", err, r.describe())
	}
	return out
}
