package policy

import (
	"context"
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// checkOne checks http://evil.example.com/mcp, which resolves to addr, against one
// policy with spec.
func checkOne(addr string, spec cantusv1alpha1.ToolSourcePolicySpec) Decision {
	spec.Hosts = []string{"evil.example.com"}
	c := &Checker{Namespace: "ns", Resolver: fakeResolver{"evil.example.com": {addr}},
		Policies: []cantusv1alpha1.ToolSourcePolicy{pol("p", spec)}}
	return c.CheckURL(context.Background(), "http://evil.example.com/mcp")
}

// Every RFC 6052 layout of the local-use NAT64 prefix 64:ff9b:1::/48, and SIIT's
// IPv4-translated form, carry the metadata address through a catch-all CIDR no more
// (review R14). Before, the first and the SIIT form were accepted under 0.0.0.0/0,::/0.
func TestEveryNAT64LayoutAndSIITAreSeenThrough(t *testing.T) {
	catchAll := []string{"0.0.0.0/0", "::/0"}
	for _, addr := range []string{
		"64:ff9b:1:a9fe:a9:fe00:0:1", // /48: the IPv4 address around the u octet
		"64:ff9b:1:a9:fe:a9fe:0:1",   // /56
		"64:ff9b:1:0:a9:fea9:fe00:0", // /64
		"64:ff9b:1::a9fe:a9fe",       // /96
		"::ffff:0:a9fe:a9fe",         // SIIT, IPv4-translated
		"::ffff:0:7f00:1",            // SIIT, loopback
		"64:ff9b:1:7f:0:1::",         // /56, loopback
	} {
		if d := checkOne(addr, cantusv1alpha1.ToolSourcePolicySpec{CIDRs: catchAll}); d.Allowed || d.Reason != cantusv1alpha1.ReasonDeniedAddress {
			t.Errorf("%s under %v: allowed=%v %s, want DeniedAddress", addr, catchAll, d.Allowed, d.Message)
		}
	}
	// Ordinary addresses in the local-use prefix are not refused, in any layout (the
	// zero bits of one layout are 0.0.0.0 in another: that alone refuses nothing).
	for _, addr := range []string{"64:ff9b:1::cb00:7107", "64:ff9b:1:cb00:71:700::", "64:ff9b:1:0:cb:71:700:0"} {
		if d := checkOne(addr, cantusv1alpha1.ToolSourcePolicySpec{CIDRs: catchAll}); !d.Allowed {
			t.Errorf("%s (203.0.113.7 over local-use NAT64) was refused: %s", addr, d.Message)
		}
	}
}

// A cluster's own (network-specific) NAT64 prefix, declared in spec.nat64Prefixes, is
// decoded by its length as RFC 6052 says, and the IPv4 address it carries is checked.
// Unknown, 2001:db8:64::a9fe:a9fe is an ordinary IPv6 address.
func TestANetworkSpecificNAT64PrefixIsSeenThroughOnceDeclared(t *testing.T) {
	catchAll := []string{"0.0.0.0/0", "::/0"}
	for _, tc := range []struct {
		addr, prefix string
	}{
		{"2001:db8:64::a9fe:a9fe", "2001:db8:64::/96"},
		{"2001:db8:a9fe:a9fe::", "2001:db8::/32"},
		{"2001:db8:1:a9fe:a9:fe00::", "2001:db8:1::/48"},
		{"2001:db8:1:2:a9:fea9:fe00:0", "2001:db8:1:2::/64"},
		{"2001:db8:1a9:fea9:fe::", "2001:db8:100::/40"},
	} {
		spec := cantusv1alpha1.ToolSourcePolicySpec{CIDRs: catchAll, NAT64Prefixes: []string{tc.prefix}}
		if d := checkOne(tc.addr, spec); d.Allowed || d.Reason != cantusv1alpha1.ReasonDeniedAddress {
			t.Errorf("%s with nat64Prefixes %s: allowed=%v %s, want DeniedAddress", tc.addr, tc.prefix, d.Allowed, d.Message)
		}
	}
	if d := checkOne("2001:db8:64::cb00:7107", cantusv1alpha1.ToolSourcePolicySpec{CIDRs: catchAll, NAT64Prefixes: []string{"2001:db8:64::/96"}}); !d.Allowed {
		t.Errorf("an ordinary address over the cluster's NAT64 was refused: %s", d.Message)
	}
}
