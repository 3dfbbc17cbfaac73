package policy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// An IPv6 address that carries a special IPv4 address is itself special, whatever the
// form (the cluster's own NAT64 prefixes included); no catch-all CIDR unlocks a special
// address; and no address makes the floors panic.
func FuzzSpecialAddressesSeenThroughIPv6(f *testing.F) {
	for _, seed := range []string{"169.254.169.254", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "2001:0:4136:e378:8000:63bf:5601:5601", "::10.0.0.1", "fe80::1", "2606:4700::6810:84e5", "0.0.0.0", "::",
		"64:ff9b:1:a9fe:a9:fe00:0:1", "::ffff:0:a9fe:a9fe", "2001:db8:64::a9fe:a9fe", "2001:db8:1a9:fea9:fe::"} {
		f.Add(seed)
	}
	nat64 := []netip.Prefix{netip.MustParsePrefix("2001:db8:64::/96"), netip.MustParsePrefix("2001:db8:100::/40")}
	catchAll := []string{"0.0.0.0/0", "::/0", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001:db8:64::/96", "2001:db8:100::/40"}
	f.Fuzz(func(t *testing.T, text string) {
		a, err := netip.ParseAddr(text)
		if err != nil {
			return
		}
		kind, minBits := specialKind(a, nat64)
		for _, e := range embeddedIPv4s(a, nat64) {
			if plain, _ := plainSpecialKind(e.v4); plain != "" && kind == "" && (!e.ambiguous || !e.v4.IsUnspecified()) {
				t.Fatalf("%s carries %s (%s), a %s address, but is not refused", a, e.v4, e.form, plain)
			}
		}
		if kind != "" && inNarrowCIDR(catchAll, a, minBits) {
			t.Fatalf("%s (%s) is unlocked by a catch-all CIDR", a, kind)
		}
	})
}

// An image entry allows only images whose normalised repository is the entry or lies
// under it at a path boundary (or, for an entry with a tag or digest, that exact image).
func FuzzImageEntriesMatchAtAPathBoundary(f *testing.F) {
	for _, seed := range [][2]string{
		{"ghcr.io/acme", "ghcr.io/acme/srv:1"}, {"ghcr.io/acme", "ghcr.io/acme-evil/x"}, {"ghcr.io", "ghcr.io.evil/x"},
		{"nginx", "nginx:1"}, {"nginx", "nginx-evil"}, {"ghcr.io/acme/srv:1", "ghcr.io/acme/srv:1"}, {"localhost:5000/a", "localhost:5000/ab"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, entry, image string) {
		if !imageListed([]string{entry}, image) {
			return
		}
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil {
			t.Fatalf("allowed %q, which is not a reference", image)
		}
		repo := named.Name()
		e := lowerRegistry(strings.TrimSuffix(strings.TrimSpace(entry), "/"))
		if isRegistryOnly(e) {
			if !strings.HasPrefix(repo, e+"/") {
				t.Fatalf("registry entry %q allowed %q", entry, image)
			}
			return
		}
		ref, err := reference.ParseNormalizedNamed(e)
		if err != nil {
			t.Fatalf("entry %q does not parse but allowed %q", entry, image)
		}
		if repo != ref.Name() && !strings.HasPrefix(repo, ref.Name()+"/") {
			t.Fatalf("entry %q allowed %q outside its path (%s)", entry, image, repo)
		}
	})
}

// hostListed never matches a host that is not the entry or below a wildcard entry.
func FuzzHostListed(f *testing.F) {
	for _, seed := range [][2]string{{"*.example.com", "a.example.com"}, {"*.example.com", "example.com"}, {"example.com", "example.com.evil"}, {"127.0.0.1", "::ffff:127.0.0.1"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, host string) {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if !hostListed([]string{pattern}, host) {
			return
		}
		p := strings.ToLower(strings.TrimSuffix(pattern, "."))
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if !strings.HasSuffix(host, "."+suffix) {
				t.Fatalf("%q allowed %q", pattern, host)
			}
			return
		}
		if p == host {
			return
		}
		a, errA := netip.ParseAddr(p)
		b, errB := netip.ParseAddr(host)
		if errA != nil || errB != nil || a.Unmap() != b.Unmap() {
			t.Fatalf("%q allowed %q", pattern, host)
		}
	})
}
