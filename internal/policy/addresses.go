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

func specialKind(a netip.Addr) string {
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
