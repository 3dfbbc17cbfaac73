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
// Special addresses (metadata, loopback, link-local, unspecified, multicast) need a CIDR
// of the policy that contains them, or the host written as that IP literal; otherwise, if
// the policy lists CIDRs, the address must be in one of them.
func addressRefusal(p *cantusv1alpha1.ToolSourcePolicy, host string, a netip.Addr) string {
	inCIDR := inAnyCIDR(p.Spec.CIDRs, a)
	namedAsLiteral := hostIsLiteral(p.Spec.Hosts, a) && host == a.String()
	if kind := specialKind(a); kind != "" && !inCIDR && !namedAsLiteral {
		return fmt.Sprintf("%s resolves to %s, a %s address, which is refused unless spec.cidrs names it (e.g. %s/%d)",
			host, a, kind, a, a.BitLen())
	}
	if len(p.Spec.CIDRs) > 0 && !inCIDR {
		return fmt.Sprintf("%s resolves to %s, outside spec.cidrs %v", host, a, p.Spec.CIDRs)
	}
	return ""
}

// specialKind names the kind of a special address, looking through the IPv6 forms that
// carry an IPv4 address (a NAT64 gateway or a 6to4 relay would deliver a packet for
// 64:ff9b::a9fe:a9fe to 169.254.169.254).
func specialKind(a netip.Addr) string {
	if v4, form := embeddedIPv4(a); form != "" {
		if kind := plainSpecialKind(v4); kind != "" {
			return fmt.Sprintf("%s (%s, as %s)", kind, v4, form)
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

// embeddedIPv4 returns the IPv4 address an IPv6 address carries and the form's name, or
// form "" when it carries none.
func embeddedIPv4(a netip.Addr) (netip.Addr, string) {
	if !a.Is6() {
		return netip.Addr{}, ""
	}
	if a.Is4In6() {
		return a.Unmap(), "IPv4-mapped"
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "NAT64"
	case nat64Local.Contains(a):
		// RFC 8215 local-use NAT64 prefixes are /48 and longer; the address sits in the
		// last 32 bits for a /96, the common case.
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "NAT64"
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), "6to4"
	case teredoPrefix.Contains(a):
		return netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}), "Teredo"
	case v4Compatible.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "IPv4-compatible"
	}
	return netip.Addr{}, ""
}

func plainSpecialKind(a netip.Addr) string {
	switch {
	case isMetadata(a):
		return "cloud metadata"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	}
	return ""
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

func hostIsLiteral(hosts []string, a netip.Addr) bool {
	for _, h := range hosts {
		if b, err := netip.ParseAddr(h); err == nil && b.Unmap() == a {
			return true
		}
	}
	return false
}
