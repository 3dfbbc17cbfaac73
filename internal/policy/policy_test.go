package policy

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// fakeResolver answers from a table, so tests can make a name resolve anywhere.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	answers, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	out := make([]netip.Addr, 0, len(answers))
	for _, a := range answers {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func pol(name string, spec cantusv1alpha1.ToolSourcePolicySpec) cantusv1alpha1.ToolSourcePolicy {
	return cantusv1alpha1.ToolSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func TestCheckURL(t *testing.T) {
	resolver := fakeResolver{
		"mcp.example.com":       {"93.184.216.34"},
		"api.tools.example.com": {"93.184.216.35"},
		"rebind.example.com":    {"93.184.216.36", "169.254.169.254"},
		"internal.example.com":  {"10.1.2.3"},
		"localhost":             {"127.0.0.1"},
	}
	cases := []struct {
		name        string
		policies    []cantusv1alpha1.ToolSourcePolicy
		url         string
		wantAllowed bool
		wantReason  string
		wantInMsg   string
	}{
		{"no policy", nil, "https://mcp.example.com/mcp", false, cantusv1alpha1.ReasonNoPolicy, "no ToolSourcePolicy selects namespace \"team-a\""},
		{"exact host", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"mcp.example.com"}})},
			"https://mcp.example.com/mcp", true, cantusv1alpha1.ReasonAllowed, "allowed by ToolSourcePolicy p"},
		{"host not listed names the fix", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"other.example.com"}})},
			"https://mcp.example.com/mcp", false, cantusv1alpha1.ReasonNotAllowlisted, `add "mcp.example.com" to spec.hosts`},
		{"wildcard matches subdomains", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"*.example.com"}})},
			"http://api.tools.example.com:8080/mcp", true, cantusv1alpha1.ReasonAllowed, ""},
		{"wildcard does not match the apex", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"*.example.com"}})},
			"http://example.com/mcp", false, cantusv1alpha1.ReasonNotAllowlisted, ""},
		{"port not listed", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"mcp.example.com"}, Ports: []int32{443}})},
			"http://mcp.example.com:8080/mcp", false, cantusv1alpha1.ReasonNotAllowlisted, "does not list port 8080"},
		{"metadata IP literal refused", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"*.example.com", "mcp.example.com"}})},
			"http://169.254.169.254/latest", false, cantusv1alpha1.ReasonNotAllowlisted, ""},
		{"name resolving to a metadata address refused", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"rebind.example.com"}})},
			"http://rebind.example.com/mcp", false, cantusv1alpha1.ReasonDeniedAddress, "a cloud metadata address"},
		{"loopback refused unless a CIDR names it", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"localhost"}})},
			"http://localhost:8080/mcp", false, cantusv1alpha1.ReasonDeniedAddress, "loopback"},
		{"loopback allowed by an explicit CIDR", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"localhost"}, CIDRs: []string{"127.0.0.0/8"}})},
			"http://localhost:8080/mcp", true, cantusv1alpha1.ReasonAllowed, ""},
		{"loopback allowed when the policy lists the IP literal", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"127.0.0.1"}})},
			"http://127.0.0.1:8080/mcp", true, cantusv1alpha1.ReasonAllowed, ""},
		{"address outside the policy CIDRs", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"internal.example.com"}, CIDRs: []string{"192.168.0.0/16"}})},
			"http://internal.example.com/mcp", false, cantusv1alpha1.ReasonDeniedAddress, "outside spec.cidrs"},
		{"unresolvable name", []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"gone.example.com"}})},
			"http://gone.example.com/mcp", false, cantusv1alpha1.ReasonDNSError, "cannot resolve"},
		{"audit mode lets a refused URL through and says so", []cantusv1alpha1.ToolSourcePolicy{pol("audit", cantusv1alpha1.ToolSourcePolicySpec{Mode: cantusv1alpha1.PolicyAudit, Hosts: []string{"x.example.com"}})},
			"https://mcp.example.com/mcp", true, cantusv1alpha1.ReasonAllowedByAudit, "Enforce would refuse it"},
		{"an enforce policy wins over an audit one", []cantusv1alpha1.ToolSourcePolicy{
			pol("audit", cantusv1alpha1.ToolSourcePolicySpec{Mode: cantusv1alpha1.PolicyAudit}),
			pol("enforce", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"mcp.example.com"}}),
		}, "https://mcp.example.com/mcp", true, cantusv1alpha1.ReasonAllowed, "enforce"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Checker{Policies: tc.policies, Namespace: "team-a", Resolver: resolver}
			d := c.CheckURL(context.Background(), tc.url)
			if d.Allowed != tc.wantAllowed || d.Reason != tc.wantReason {
				t.Fatalf("got allowed=%v reason=%s (%s), want allowed=%v reason=%s", d.Allowed, d.Reason, d.Message, tc.wantAllowed, tc.wantReason)
			}
			if !strings.Contains(d.Message, tc.wantInMsg) {
				t.Fatalf("message %q does not contain %q", d.Message, tc.wantInMsg)
			}
		})
	}
}

func TestCheckStdio(t *testing.T) {
	p := pol("p", cantusv1alpha1.ToolSourcePolicySpec{Images: []string{"ghcr.io/acme/"}, Commands: []string{"npx"}})
	c := &Checker{Policies: []cantusv1alpha1.ToolSourcePolicy{p}, Namespace: "ns"}
	if d := c.CheckStdio("ghcr.io/acme/tools:1", []string{"npx", "server"}); !d.Allowed {
		t.Fatalf("listed image and command refused: %s", d.Message)
	}
	if d := c.CheckStdio("docker.io/evil/tools:1", []string{"npx"}); d.Allowed || !strings.Contains(d.Message, "spec.images") {
		t.Fatalf("unlisted image: %+v", d)
	}
	if d := c.CheckStdio("ghcr.io/acme/tools:1", []string{"bash", "-c", "x"}); d.Allowed || !strings.Contains(d.Message, `"bash" to spec.commands`) {
		t.Fatalf("unlisted command: %+v", d)
	}
}

// A SkillServer's pod image and service account need a policy listing them; an Audit
// policy lets them pass saying what Enforce would refuse; "*" allows any account.
func TestCheckPodOverrides(t *testing.T) {
	enforce := pol("e", cantusv1alpha1.ToolSourcePolicySpec{Images: []string{"ghcr.io/acme"}, ServiceAccounts: []string{"runner"}})
	c := &Checker{Policies: []cantusv1alpha1.ToolSourcePolicy{enforce}, Namespace: "ns"}
	for _, tc := range []struct {
		name   string
		d      Decision
		reason string
		says   string
	}{
		{"listed image", c.CheckPodImage("ghcr.io/acme/adapter:2"), cantusv1alpha1.ReasonAllowed, "allowed by ToolSourcePolicy e"},
		{"listed account", c.CheckServiceAccount("runner"), cantusv1alpha1.ReasonAllowed, "allowed by ToolSourcePolicy e"},
		{"unlisted image", c.CheckPodImage("ghcr.io/acme-evil/adapter:2"), cantusv1alpha1.ReasonNotAllowlisted, `add an image prefix of "ghcr.io/acme-evil/adapter:2" to spec.images`},
		{"unlisted account", c.CheckServiceAccount("cloud-admin"), cantusv1alpha1.ReasonNotAllowlisted, `add "cloud-admin" to spec.serviceAccounts`},
		{"no policy", (&Checker{Namespace: "ns"}).CheckServiceAccount("runner"), cantusv1alpha1.ReasonNoPolicy, `no ToolSourcePolicy selects namespace "ns"`},
		{"audit", (&Checker{Namespace: "ns", Policies: []cantusv1alpha1.ToolSourcePolicy{pol("a", cantusv1alpha1.ToolSourcePolicySpec{Mode: cantusv1alpha1.PolicyAudit})}}).CheckPodImage("evil.example/x:1"),
			cantusv1alpha1.ReasonAllowedByAudit, "Enforce would refuse it"},
		{"any account", (&Checker{Namespace: "ns", Policies: []cantusv1alpha1.ToolSourcePolicy{pol("any", cantusv1alpha1.ToolSourcePolicySpec{ServiceAccounts: []string{"*"}})}}).CheckServiceAccount("whoever"),
			cantusv1alpha1.ReasonAllowed, "allowed"},
	} {
		if tc.d.Reason != tc.reason || !strings.Contains(tc.d.Message, tc.says) || tc.d.Allowed != (tc.reason != cantusv1alpha1.ReasonNotAllowlisted && tc.reason != cantusv1alpha1.ReasonNoPolicy) {
			t.Errorf("%s: %+v, want reason %s saying %q", tc.name, tc.d, tc.reason, tc.says)
		}
	}
}

func TestDialerRefusesWhatItDidNotCheck(t *testing.T) {
	c := &Checker{
		Policies:  []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"rebind.example.com"}})},
		Namespace: "ns",
		Resolver:  fakeResolver{"rebind.example.com": {"169.254.169.254"}},
	}
	_, err := c.DialContext(context.Background(), "tcp", "rebind.example.com:80")
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("dial to a name that now resolves to a metadata address: %v, want ErrRefused", err)
	}
}
