package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
)

// Every manifest here must be refused by the API server itself, with a message naming
// the fix.
func TestAPIServerRefusesBadImportsAndPolicies(t *testing.T) {
	ns := kubekit.NewNamespace(t, k8sClient)
	cases := []struct {
		name     string
		manifest string
		want     string
	}{
		{"file URL", importYAML(`url: file:///etc/passwd`), "url must be an absolute http:// or https:// URL (file:, ftp:, javascript: and other schemes are refused)"},
		{"ftp URL", importYAML(`url: ftp://files.example.com/mcp`), "url must be an absolute http:// or https:// URL"},
		{"javascript URL", importYAML(`url: "javascript:alert(1)"`), "url must be an absolute http:// or https:// URL"},
		{"URL without host", importYAML(`url: "http://:8080/mcp"`), "url must name a host"},
		{"credentials in the URL", importYAML(`url: https://user:pw@mcp.example.com/mcp`), "put them in a header whose value comes from a Secret (spec.headers)"},
		{"http import without url", importYAML(`transport: sse`), "streamable-http and sse imports need url"},
		{"stdio import with a url", importYAML("transport: stdio\n  url: http://x.example.com/mcp\n  stdio: {image: ghcr.io/acme/srv:1, command: [srv]}"), "stdio imports take stdio.image and stdio.command instead of url"},
		{"stdio without image", importYAML("transport: stdio\n  stdio: {command: [srv]}"), "spec.stdio.image: Required value"},
		{"stdio without command", importYAML("transport: stdio\n  stdio: {image: ghcr.io/acme/srv:1}"), "spec.stdio.command: Required value"},
		{"stdio without the stdio block", importYAML("transport: stdio"), "stdio imports need stdio (image and command)"},
		{"pipe in the command", importYAML("transport: stdio\n  stdio: {image: ghcr.io/acme/srv:1, command: [\"srv | sh\"]}"), "it runs as a list, never through a shell"},
		{"semicolon in an arg", importYAML("transport: stdio\n  stdio: {image: ghcr.io/acme/srv:1, command: [srv], args: [\"a; rm -rf /\"]}"), "args must not contain shell metacharacters"},
		{"dollar in an arg", importYAML("transport: stdio\n  stdio: {image: ghcr.io/acme/srv:1, command: [srv], args: [\"$HOME\"]}"), "args must not contain shell metacharacters"},
		{"backtick in the command", importYAML("transport: stdio\n  stdio: {image: ghcr.io/acme/srv:1, command: [\"`id`\"]}"), "command must not contain shell metacharacters"},
		{"newline in an arg", importYAML("transport: stdio\n  stdio: {image: ghcr.io/acme/srv:1, command: [srv], args: [\"a\\nb\"]}"), "args must not contain shell metacharacters"},
		{"unknown transport", importYAML("transport: websocket\n  url: http://x.example.com/mcp"), `spec.transport: Unsupported value: "websocket"`},
		{"header with a bad name", importYAML("url: http://x.example.com/mcp\n  headers: [{name: \"X Bad\", valueFrom: {name: s}}]"), "spec.headers[0].name in body should match"},
		{"CA bundle from both a Secret and a ConfigMap", importYAML("url: https://x.example.com/mcp\n  tls: {caBundle: {secretRef: {name: a}, configMapRef: {name: b}}}"), "caBundle takes exactly one of secretRef or configMapRef"},
		{"Host header", importYAML("url: http://x.example.com/mcp\n  headers: [{name: Host, valueFrom: {name: s}}]"), "this header is set by the MCP client or the HTTP transport"},
		{"session header", importYAML("url: http://x.example.com/mcp\n  headers: [{name: mcp-session-id, valueFrom: {name: s}}]"), "cannot be overridden"},
		{"header name with a control character", importYAML("url: http://x.example.com/mcp\n  headers: [{name: \"X-A\\u0007\", valueFrom: {name: s}}]"), "spec.headers[0].name in body should match"},
		{"policy host with a scheme", policyYAML(`hosts: ["https://mcp.example.com"]`), "each hosts entry must be a host name"},
		{"policy host with a path", policyYAML(`hosts: ["mcp.example.com/mcp"]`), "each hosts entry must be a host name"},
		{"policy host with a port", policyYAML(`hosts: ["mcp.example.com:443"]`), "ports go in spec.ports"},
		{"policy host with a wildcard in the middle", policyYAML(`hosts: ["mcp.*.example.com"]`), "each hosts entry must be a host name"},
		{"policy image with a scheme", policyYAML(`images: ["https://ghcr.io/acme"]`), "no scheme"},
		{"policy image with a wildcard", policyYAML(`images: ["ghcr.io/acme/*"]`), "no wildcards"},
		{"policy command with arguments", policyYAML(`commands: ["npx -y server"]`), "each commands entry is one argv[0]"},
		{"policy with a bad CIDR", policyYAML(`cidrs: ["10.0.0.0/33"]`), "each cidrs entry must be a CIDR"},
		{"policy with an IPv4 NAT64 prefix", policyYAML(`nat64Prefixes: ["10.0.0.0/8"]`), "each nat64Prefixes entry must be an IPv6 CIDR of length /32, /40, /48, /56, /64 or /96"},
		{"policy with a NAT64 prefix of a length RFC 6052 has not", policyYAML(`nat64Prefixes: ["2001:db8:64::/80"]`), "each nat64Prefixes entry must be an IPv6 CIDR"},
		{"policy with a NAT64 prefix that is not a CIDR", policyYAML(`nat64Prefixes: ["2001:db8:64::"]`), "each nat64Prefixes entry must be an IPv6 CIDR"},
		{"policy with an unknown mode", policyYAML(`mode: Warn`), `spec.mode: Unsupported value: "Warn"`},
		{"policy with port 0", policyYAML(`ports: [0]`), "should be greater than or equal to 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			manifest := strings.ReplaceAll(tc.manifest, "NAMESPACE", ns)
			if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
				t.Fatalf("test manifest does not parse: %v\n%s", err, manifest)
			}
			err := k8sClient.Create(context.Background(), obj)
			if err == nil {
				_ = k8sClient.Delete(context.Background(), obj)
				t.Fatalf("the API server accepted:\n%s", manifest)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused, but the message does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

func importYAML(spec string) string {
	return "apiVersion: cantus.dev/v1alpha1\nkind: RemoteToolImport\nmetadata:\n  name: bad\n  namespace: NAMESPACE\nspec:\n  " + spec + "\n"
}

func policyYAML(spec string) string {
	return "apiVersion: cantus.dev/v1alpha1\nkind: ToolSourcePolicy\nmetadata:\n  name: bad-policy\nspec:\n  " + spec + "\n"
}

// The NAT64 prefixes RFC 6052 defines are accepted, at every length it allows.
func TestAPIServerAcceptsRFC6052NAT64Prefixes(t *testing.T) {
	obj := &unstructured.Unstructured{}
	manifest := policyYAML(`nat64Prefixes: ["2001:db8:64::/96", "2001:db8::/32", "2001:db8:100::/40", "2001:db8:1::/48", "2001:db8:1:100::/56", "2001:db8:1:2::/64"]`)
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetName("nat64-prefixes")
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatalf("refused: %v", err)
	}
	_ = k8sClient.Delete(context.Background(), obj)
}
