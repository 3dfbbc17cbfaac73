package policy

import (
	"fmt"
	"net/netip"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Cloud metadata endpoints. They hand out credentials to whoever asks from inside the
// cloud, so an import must never reach one unless a policy names it on purpose.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, …
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

// addressRefusal says why a policy does not accept an address, or "" when it does.
// Special addresses (metadata, loopback, link-local, unspecified, multicast) must be named
// on purpose: by a CIDR of the policy no wider than their own block (so 0.0.0.0/0 or
// ::/0 never unlocks them), or by the host written as that IP literal; otherwise, if the
// policy lists CIDRs, the address must be in one of them.
func addressRefusal(p *cantusv1alpha1.ToolSourcePolicy, host string, a netip.Addr) string {
	inCIDR := inAnyCIDR(p.Spec.CIDRs, a)
	namedAsLiteral := hostIsLiteral(p.Spec.Hosts, a) && host == a.String()
	if kind, minBits := specialKind(a); kind != "" && !inNarrowCIDR(p.Spec.CIDRs, a, minBits) && !namedAsLiteral {
		return fmt.Sprintf("%s resolves to %s, a %s address, which is refused unless spec.cidrs names it with a prefix of /%d or longer (e.g. %s/%d)",
			host, a, kind, minBits, a, a.BitLen())
	}
	if len(p.Spec.CIDRs) > 0 && !inCIDR {
		return fmt.Sprintf("%s resolves to %s, outside spec.cidrs %v", host, a, p.Spec.CIDRs)
	}
	return ""
}

// specialKind names the kind of a special address, looking through the IPv6 forms that
// carry an IPv4 address (a NAT64 gateway or a 6to4 relay would deliver a packet for
// 64:ff9b::a9fe:a9fe to 169.254.169.254), and the shortest prefix length of a CIDR that
// may unlock it: the length of the special block itself, moved to where the form carries
// the IPv4 address.
func specialKind(a netip.Addr) (string, int) {
	if v4, form, offset := embeddedIPv4(a); form != "" {
		if kind, bits := plainSpecialKind(v4); kind != "" {
			return fmt.Sprintf("%s (%s, as %s)", kind, v4, form), offset + bits
		}
	}
	return plainSpecialKind(a)
}

// Prefixes of the IPv6 forms that embed an IPv4 address.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	teredoPrefix = netip.MustParsePrefix("2001::/32")
	v4Compatible = netip.MustParsePrefix("::/96")
)

// embeddedIPv4 returns the IPv4 address an IPv6 address carries, the form's name and the
// bit offset at which the form carries it, or form "" when it carries none.
func embeddedIPv4(a netip.Addr) (netip.Addr, string, int) {
	if !a.Is6() {
		return netip.Addr{}, "", 0
	}
	if a.Is4In6() {
		return a.Unmap(), "IPv4-mapped", 96
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "NAT64", 96
	case nat64Local.Contains(a):
		// RFC 8215 local-use NAT64 prefixes are /48 and longer; the address sits in the
		// last 32 bits for a /96, the common case.
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "NAT64", 96
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), "6to4", 16
	case teredoPrefix.Contains(a):
		return netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}), "Teredo", 96
	case v4Compatible.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "IPv4-compatible", 96
	}
	return netip.Addr{}, "", 0
}

// plainSpecialKind names the kind of a special address and the prefix length of its
// block (a metadata endpoint's block is the address alone).
func plainSpecialKind(a netip.Addr) (string, int) {
	v4 := a.Is4()
	switch {
	case isMetadata(a):
		return "cloud metadata", a.BitLen()
	case a.IsLoopback():
		return "loopback", pick(v4, 8, 128)
	case a.IsLinkLocalUnicast():
		return "link-local", pick(v4, 16, 10)
	case a.IsLinkLocalMulticast():
		return "link-local", pick(v4, 24, 16)
	case a.IsUnspecified():
		return "unspecified", a.BitLen()
	case a.IsMulticast():
		return "multicast", pick(v4, 4, 8)
	}
	return "", 0
}

func pick(v4 bool, ipv4Bits, ipv6Bits int) int {
	if v4 {
		return ipv4Bits
	}
	return ipv6Bits
}

func isMetadata(a netip.Addr) bool {
	for _, m := range metadataAddresses {
		if m == a {
			return true
		}
	}
	return false
}

func inAnyCIDR(cidrs []string, a netip.Addr) bool {
	for _, c := range cidrs {
		if prefix, err := netip.ParsePrefix(c); err == nil && prefix.Contains(a) {
			return true
		}
	}
	return false
}

// inNarrowCIDR reports whether a CIDR of at least minBits contains a.
func inNarrowCIDR(cidrs []string, a netip.Addr, minBits int) bool {
	for _, c := range cidrs {
		if prefix, err := netip.ParsePrefix(c); err == nil && prefix.Bits() >= minBits && prefix.Contains(a) {
			return true
		}
	}
	return false
}

func hostIsLiteral(hosts []string, a netip.Addr) bool {
	for _, h := range hosts {
		if b, err := netip.ParseAddr(h); err == nil && b.Unmap() == a {
			return true
		}
	}
	return false
}
