package policy

import (
	"context"
	"net"
	"strings"
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// An IPv6 address that carries a metadata, loopback or link-local IPv4 address is
// refused like the IPv4 address itself, whatever the form.
func TestEmbeddedIPv4IsCheckedAgainstTheFloors(t *testing.T) {
	forms := map[string]string{
		"64:ff9b::a9fe:a9fe":   "NAT64",
		"64:ff9b:1::a9fe:a9fe": "NAT64",
		"2002:a9fe:a9fe::1":    "6to4",
		"::169.254.169.254":    "IPv4-compatible",
		"::ffff:127.0.0.1":     "loopback",
	}
	// Teredo stores the client address inverted: 169.254.169.254 is 5601:5601.
	forms["2001:0:4136:e378:8000:63bf:5601:5601"] = "Teredo"
	for addr, form := range forms {
		c := &Checker{Namespace: "ns", Resolver: fakeResolver{"evil.example.com": {addr}},
			Policies: []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"evil.example.com"}})}}
		d := c.CheckURL(context.Background(), "http://evil.example.com/mcp")
		if d.Allowed || d.Reason != cantusv1alpha1.ReasonDeniedAddress {
			t.Errorf("%s (%s): allowed=%v reason=%s, want DeniedAddress", addr, form, d.Allowed, d.Reason)
		}
	}
	// An ordinary global IPv6 address is not mistaken for an embedded one.
	c := &Checker{Namespace: "ns", Resolver: fakeResolver{"ok.example.com": {"2606:4700::6810:84e5"}},
		Policies: []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"ok.example.com"}})}}
	if d := c.CheckURL(context.Background(), "http://ok.example.com/mcp"); !d.Allowed {
		t.Errorf("global IPv6 refused: %s", d.Message)
	}
}

// Image entries match whole path segments after normalising both references.
func TestImageEntriesMatchAtAPathBoundary(t *testing.T) {
	cases := []struct {
		entry, image string
		want         bool
	}{
		{"ghcr.io/acme", "ghcr.io/acme/srv:1", true},
		{"ghcr.io/acme/", "ghcr.io/acme/srv:1", true},
		{"ghcr.io/acme", "ghcr.io/acme", true},
		{"ghcr.io/acme", "ghcr.io/acme-evil/x", false},
		{"ghcr.io/acme", "ghcr.io/acmecorp/x:1", false},
		{"ghcr.io", "ghcr.io/anyone/x", true},
		{"ghcr.io", "ghcr.io.evil.com/x", false},
		{"nginx", "docker.io/library/nginx:1.27", true},
		{"docker.io/library/nginx", "nginx", true},
		{"nginx", "nginx-evil", false},
		{"ghcr.io/acme/srv:1", "ghcr.io/acme/srv:1", true},
		{"ghcr.io/acme/srv:1", "ghcr.io/acme/srv:2", false},
		{"GHCR.io/acme", "ghcr.io/acme/x", true},
		{"ghcr.io/acme", "not a reference", false},
	}
	for _, tc := range cases {
		if got := imageListed([]string{tc.entry}, tc.image); got != tc.want {
			t.Errorf("entry %q, image %q: listed = %v, want %v", tc.entry, tc.image, got, tc.want)
		}
	}
}

// Audit mode resolves the host, keeps the floors, and returns the checked addresses, so
// an audited handshake connects (it used to fail with a dialer error).
func TestAuditModeResolvesKeepsTheFloorsAndDials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Close()
		}
	}()
	audit := pol("audit", cantusv1alpha1.ToolSourcePolicySpec{Mode: cantusv1alpha1.PolicyAudit, CIDRs: []string{"127.0.0.0/8"}})
	c := &Checker{Namespace: "ns", Policies: []cantusv1alpha1.ToolSourcePolicy{audit},
		Resolver: fakeResolver{"unlisted.example.com": {"127.0.0.1"}, "metadata.example.com": {"169.254.169.254"}}}

	d := c.CheckURL(context.Background(), "http://unlisted.example.com/mcp")
	if !d.Allowed || d.Reason != cantusv1alpha1.ReasonAllowedByAudit || len(d.Addresses) != 1 || !strings.Contains(d.Message, "Enforce would refuse it") {
		t.Fatalf("audited decision = %+v", d)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	conn, err := c.DialContext(context.Background(), "tcp", net.JoinHostPort("unlisted.example.com", port))
	if err != nil {
		t.Fatalf("audited dial: %v", err)
	}
	conn.Close()

	d = c.CheckURL(context.Background(), "http://metadata.example.com/mcp")
	if d.Allowed || d.Reason != cantusv1alpha1.ReasonDeniedAddress {
		t.Fatalf("Audit mode let a metadata address through: %+v", d)
	}
}

// A catch-all CIDR never unlocks a special address: the metadata endpoint, loopback and
// link-local need the literal or a CIDR no wider than their own block, in every form
// that carries them (issue 23, finding 11).
func TestCatchAllCIDRsDoNotUnlockSpecialAddresses(t *testing.T) {
	cases := []struct {
		addr  string
		cidrs []string
		want  bool
	}{
		{"64:ff9b::a9fe:a9fe", []string{"::/0", "0.0.0.0/0"}, false},
		{"2002:a9fe:a9fe::1", []string{"::/0", "0.0.0.0/0"}, false},
		{"169.254.169.254", []string{"0.0.0.0/0"}, false},
		{"127.0.0.1", []string{"0.0.0.0/0"}, false},
		{"127.0.0.1", []string{"0.0.0.0/1"}, false},
		{"::1", []string{"::/0"}, false},
		{"fe80::1", []string{"::/0"}, false},
		// Link-local's own block unlocks link-local, but not the metadata address in it.
		{"169.254.1.1", []string{"169.254.0.0/16"}, true},
		{"169.254.169.254", []string{"169.254.0.0/16"}, false},
		{"169.254.169.254", []string{"169.254.169.254/32"}, true},
		{"127.0.0.1", []string{"127.0.0.0/8"}, true},
		{"64:ff9b::7f00:1", []string{"64:ff9b::7f00:0/104"}, true},
		{"64:ff9b::7f00:1", []string{"64:ff9b::/96"}, false},
		{"2002:a9fe:a9fe::1", []string{"2002:a9fe:a9fe::/48"}, true},
		// Ordinary addresses are still allowed by a catch-all.
		{"203.0.113.7", []string{"0.0.0.0/0"}, true},
		{"2606:4700::6810:84e5", []string{"::/0"}, true},
	}
	for _, tc := range cases {
		c := &Checker{Namespace: "ns", Resolver: fakeResolver{"evil.example.com": {tc.addr}},
			Policies: []cantusv1alpha1.ToolSourcePolicy{pol("p", cantusv1alpha1.ToolSourcePolicySpec{Hosts: []string{"evil.example.com"}, CIDRs: tc.cidrs})}}
		d := c.CheckURL(context.Background(), "http://evil.example.com/mcp")
		if d.Allowed != tc.want {
			t.Errorf("%s with cidrs %v: allowed=%v (%s), want %v", tc.addr, tc.cidrs, d.Allowed, d.Message, tc.want)
		}
	}
}
