package peers

import (
	"context"
	"sort"
	"testing"
)

// Inspector runs the MCP inspector CLI (@modelcontextprotocol/inspector-cli) against
// url with args (e.g. "--method", "tools/list") from its own build/ folder, and returns
// its stdout (pretty-printed JSON for a successful method). The transport is detected
// from the URL: …/mcp is streamable HTTP, …/sse is SSE; pass "--transport", "http"|"sse"
// to override. A non-zero exit fails the test. The CLI exits 0 even when a tool result
// has isError: true — inspect the output.
func Inspector(t testing.TB, ctx context.Context, url string, args ...string) string {
	t.Helper()
	build := moduleFile(t, "@modelcontextprotocol/inspector-cli", "build")
	r := run(ctx, build, nil, Node(t), append([]string{"index.js", url}, args...)...)
	if r.err != nil {
		t.Fatalf("peers: inspector CLI %v against %s:\n%s", args, url, r.describe())
	}
	return r.stdout
}

// InspectorCall runs `--method tools/call --tool-name tool --tool-arg k=v…` and returns
// the stdout (the tool result as JSON). The CLI parses each value as JSON when it can,
// keeps it as a string otherwise, and then converts string values to the type the
// tool's inputSchema gives the property (number/integer, boolean, object/array): so
// `times="3"` still arrives as 3 when times is an integer. To send a wrongly typed
// argument, use a TypeScript SDK client call instead.
func InspectorCall(t testing.TB, ctx context.Context, url, tool string, args map[string]string) string {
	t.Helper()
	cli := []string{"--method", "tools/call", "--tool-name", tool}
	if len(args) > 0 {
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		cli = append(cli, "--tool-arg")
		for _, k := range keys {
			cli = append(cli, k+"="+args[k])
		}
	}
	return Inspector(t, ctx, url, cli...)
}

// InspectorList runs `--method tools/list` and returns the stdout ({"tools": […]}).
func InspectorList(t testing.TB, ctx context.Context, url string) string {
	t.Helper()
	return Inspector(t, ctx, url, "--method", "tools/list")
}
