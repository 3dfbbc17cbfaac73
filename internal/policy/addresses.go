package policy

import (
	"fmt"
	"net/netip"
	"slices"

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
// policy lists CIDRs, the address must be in one of them. nat64 are the cluster's own
// NAT64 prefixes, seen through like the well-known ones.
func addressRefusal(p *cantusv1alpha1.ToolSourcePolicy, host string, a netip.Addr, nat64 []netip.Prefix) string {
	inCIDR := inAnyCIDR(p.Spec.CIDRs, a)
	namedAsLiteral := hostIsLiteral(p.Spec.Hosts, a) && host == a.String()
	if kind, minBits := specialKind(a, nat64); kind != "" && !inNarrowCIDR(p.Spec.CIDRs, a, minBits) && !namedAsLiteral {
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
// the IPv4 address. Where an address may carry an IPv4 address in several layouts, the
// one that needs the narrowest CIDR decides.
func specialKind(a netip.Addr, nat64 []netip.Prefix) (string, int) {
	kind, minBits := plainSpecialKind(a)
	for _, e := range embeddedIPv4s(a, nat64) {
		k, bits := plainSpecialKind(e.v4)
		if k == "" || (e.ambiguous && e.v4.IsUnspecified()) {
			continue
		}
		if need := e.bitsToUnlock(bits); kind == "" || need > minBits {
			kind, minBits = fmt.Sprintf("%s (%s, as %s)", k, e.v4, e.form), need
		}
	}
	return kind, minBits
}

// Prefixes of the IPv6 forms that embed an IPv4 address.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")
	siitPrefix   = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	teredoPrefix = netip.MustParsePrefix("2001::/32")
	v4Compatible = netip.MustParsePrefix("::/96")
)

// rfc6052Lengths are the NAT64 prefix lengths RFC 6052 §2.2 defines.
var rfc6052Lengths = []int{32, 40, 48, 56, 64, 96}

// embedded is an IPv4 address an IPv6 address may carry.
type embedded struct {
	v4   netip.Addr
	form string
	// at are the bytes of the IPv6 address that hold the IPv4 address, in order.
	at [4]int
	// ambiguous is set where the address may not be in this layout at all (the local-use
	// NAT64 prefix, whose length a network chooses): the zero bits of one layout read as
	// 0.0.0.0 in another, so that reading alone refuses nothing.
	ambiguous bool
}

// bitsToUnlock is the prefix length a CIDR needs to name, in this form, a block of the
// given length of IPv4 addresses.
func (e embedded) bitsToUnlock(v4Bits int) int {
	if v4Bits <= 0 {
		return e.at[0] * 8
	}
	last := v4Bits - 1
	return e.at[last/8]*8 + last%8 + 1
}

// embeddedIPv4s returns the IPv4 addresses an IPv6 address may carry: the forms that
// deliver to IPv4 (mapped, SIIT, NAT64, 6to4, Teredo, IPv4-compatible), and the NAT64
// prefixes given, decoded by their length as RFC 6052 places the address.
func embeddedIPv4s(a netip.Addr, nat64 []netip.Prefix) []embedded {
	if !a.Is6() {
		return nil
	}
	if a.Is4In6() {
		return []embedded{fromBytes(a, "IPv4-mapped", contiguous(12))}
	}
	var out []embedded
	switch {
	case nat64Prefix.Contains(a):
		out = append(out, fromBytes(a, "NAT64", contiguous(12)))
	case nat64Local.Contains(a):
		// RFC 8215's local-use prefix: a network may use it at any RFC 6052 length, so
		// every layout is read.
		for _, l := range rfc6052Lengths {
			e := fromBytes(a, fmt.Sprintf("NAT64 /%d", l), rfc6052Bytes(l))
			e.ambiguous = true
			out = append(out, e)
		}
	case siitPrefix.Contains(a):
		out = append(out, fromBytes(a, "SIIT IPv4-translated", contiguous(12)))
	case sixToFour.Contains(a):
		out = append(out, fromBytes(a, "6to4", contiguous(2)))
	case teredoPrefix.Contains(a):
		e := fromBytes(a, "Teredo", contiguous(12))
		b := e.v4.As4()
		e.v4 = netip.AddrFrom4([4]byte{b[0] ^ 0xff, b[1] ^ 0xff, b[2] ^ 0xff, b[3] ^ 0xff})
		out = append(out, e)
	case v4Compatible.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		out = append(out, fromBytes(a, "IPv4-compatible", contiguous(12)))
	}
	for _, p := range nat64 {
		if p.Addr().Is6() && slices.Contains(rfc6052Lengths, p.Bits()) && p.Contains(a) {
			out = append(out, fromBytes(a, fmt.Sprintf("NAT64 %s", p), rfc6052Bytes(p.Bits())))
		}
	}
	return out
}

// rfc6052Bytes are the bytes that hold the IPv4 address after a NAT64 prefix of the
// given length: from the end of the prefix on, skipping byte 8 (bits 64-71, the "u"
// octet, which RFC 6052 keeps zero).
func rfc6052Bytes(prefixBits int) [4]int {
	var at [4]int
	next := prefixBits / 8
	for i := range at {
		if next == 8 {
			next++
		}
		at[i] = next
		next++
	}
	return at
}

func contiguous(first int) [4]int { return [4]int{first, first + 1, first + 2, first + 3} }

func fromBytes(a netip.Addr, form string, at [4]int) embedded {
	b := a.As16()
	return embedded{v4: netip.AddrFrom4([4]byte{b[at[0]], b[at[1]], b[at[2]], b[at[3]]}), form: form, at: at}
}

// nat64Prefixes are the cluster's own NAT64 prefixes that the policies declare; every
// policy's apply, since the prefixes are a fact of the cluster's network, not a grant.
func nat64Prefixes(policies []cantusv1alpha1.ToolSourcePolicy) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range policies {
		for _, c := range p.Spec.NAT64Prefixes {
			if prefix, err := netip.ParsePrefix(c); err == nil {
				out = append(out, prefix.Masked())
			}
		}
	}
	return out
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
