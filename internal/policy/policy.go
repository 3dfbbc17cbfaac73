// Package policy decides whether a RemoteToolImport may reach its source, by the
// ToolSourcePolicies that cover its namespace. It also supplies the dialer that connects
// only to addresses it checked, so a DNS answer that changes between the check and the
// connection cannot slip past.
package policy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Resolver resolves host names; net.DefaultResolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Decision is the verdict on one source.
type Decision struct {
	Allowed bool
	// Reason and Message go into the SourceAllowed condition.
	Reason  string
	Message string
	// Policy names the policy that allowed the source.
	Policy string
	// Addresses are the checked addresses of an allowed URL's host.
	Addresses []netip.Addr
	// TokenEndpointAddresses are the checked addresses of the host of an import's token
	// endpoint, when it has one (CheckTokenEndpoint).
	TokenEndpointAddresses []netip.Addr
}

// Checker evaluates sources against the policies that cover one namespace.
type Checker struct {
	// Policies must already be filtered to those whose namespaceSelector selects Namespace.
	Policies  []cantusv1alpha1.ToolSourcePolicy
	Namespace string
	Resolver  Resolver
}

// CheckURL decides on an http(s) source: its host and port must be listed by a policy and
// every address the host resolves to must be acceptable to that same policy.
func (c *Checker) CheckURL(ctx context.Context, rawURL string) Decision {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Decision{Reason: cantusv1alpha1.ReasonInvalidSource, Message: fmt.Sprintf("%q is not an http(s) URL with a host", rawURL)}
	}
	return c.CheckHostPort(ctx, u.Hostname(), portOf(u))
}

// CheckHostPort is CheckURL for a host and port already split.
func (c *Checker) CheckHostPort(ctx context.Context, host string, port int) Decision {
	if len(c.Policies) == 0 {
		return c.noPolicy(fmt.Sprintf("host %q", host))
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	var refusals []string
	var audit, denied *Decision
	for i := range c.Policies {
		p := &c.Policies[i]
		d := c.checkHostPortAgainst(ctx, p, host, port)
		switch {
		case d.Allowed && isAudit(p):
			if audit == nil {
				audit = &d
			}
		case d.Allowed, d.Reason == cantusv1alpha1.ReasonDNSError:
			return d
		case d.Reason == cantusv1alpha1.ReasonDeniedAddress && denied == nil:
			// The host is listed but an address it resolves to is not acceptable: that
			// is the refusal to report, not "add the host".
			denied = &d
		default:
			refusals = append(refusals, d.Message)
		}
	}
	if audit != nil {
		return *audit
	}
	if denied != nil {
		// Address refusals (metadata, link-local, loopback, outside the CIDRs) are a floor
		// that Audit mode does not lift.
		return *denied
	}
	return c.auditOr(ctx, host, Decision{
		Reason: cantusv1alpha1.ReasonNotAllowlisted,
		Message: fmt.Sprintf("no ToolSourcePolicy covering namespace %q allows %s:%d (%s); to allow it, add %q to spec.hosts (and %d to spec.ports if the policy lists ports) of a ToolSourcePolicy that selects this namespace",
			c.Namespace, host, port, strings.Join(refusals, "; "), host, port),
	})
}

func (c *Checker) checkHostPortAgainst(ctx context.Context, p *cantusv1alpha1.ToolSourcePolicy, host string, port int) Decision {
	if !hostListed(p.Spec.Hosts, host) {
		return Decision{Reason: cantusv1alpha1.ReasonNotAllowlisted, Message: fmt.Sprintf("policy %s does not list host %s", p.Name, host)}
	}
	if len(p.Spec.Ports) > 0 && !slices.Contains(p.Spec.Ports, int32(port)) {
		return Decision{Reason: cantusv1alpha1.ReasonNotAllowlisted, Message: fmt.Sprintf("policy %s does not list port %d", p.Name, port)}
	}
	addrs, err := c.resolve(ctx, host)
	if err != nil {
		return Decision{Reason: cantusv1alpha1.ReasonDNSError, Message: fmt.Sprintf("cannot resolve %s: %v", host, err)}
	}
	for _, a := range addrs {
		if why := addressRefusal(p, host, a, nat64Prefixes(c.Policies)); why != "" {
			return Decision{Reason: cantusv1alpha1.ReasonDeniedAddress, Message: fmt.Sprintf("policy %s: %s", p.Name, why)}
		}
	}
	return Decision{
		Allowed:   true,
		Reason:    allowedReason(p),
		Message:   allowedMessage(p, fmt.Sprintf("%s:%d", host, port)),
		Policy:    p.Name,
		Addresses: addrs,
	}
}

// CheckStdio decides on a stdio source: one policy must allow both the image (by prefix)
// and the command (by argv[0]).
func (c *Checker) CheckStdio(image string, command []string) Decision {
	return c.checkListed(fmt.Sprintf("image %q with command %q", image, argv0(command)),
		func(p *cantusv1alpha1.ToolSourcePolicy) bool {
			return imageListed(p.Spec.Images, image) && slices.Contains(p.Spec.Commands, argv0(command))
		},
		fmt.Sprintf("add an image prefix of %q to spec.images and %q to spec.commands", image, argv0(command)))
}

// CheckImage decides on an image mounted as a volume (an agent skill's): one policy
// must allow it by prefix, as it allows the images of stdio imports.
func (c *Checker) CheckImage(image string) Decision {
	return c.checkListed(fmt.Sprintf("image %q", image),
		func(p *cantusv1alpha1.ToolSourcePolicy) bool { return imageListed(p.Spec.Images, image) },
		fmt.Sprintf("add an image prefix of %q to spec.images", image))
}

// CheckPodImage decides on the image a SkillServer's pods run (spec.pod.image): one
// policy must list it in spec.images, as for stdio imports. Where none does, a policy in
// Audit mode lets it pass with a message saying Enforce would refuse it: pod overrides
// were not checked before, and Audit is how an owner finds what Enforce will refuse.
func (c *Checker) CheckPodImage(image string) Decision {
	return c.auditListed(c.checkListed(fmt.Sprintf("pod image %q", image),
		func(p *cantusv1alpha1.ToolSourcePolicy) bool { return imageListed(p.Spec.Images, image) },
		fmt.Sprintf("add an image prefix of %q to spec.images", image)))
}

// CheckServiceAccount decides on the service account a SkillServer's pods run under
// (spec.pod.serviceAccountName): one policy must list it by name, or "*"; Audit as for
// CheckPodImage.
func (c *Checker) CheckServiceAccount(name string) Decision {
	return c.auditListed(c.checkListed(fmt.Sprintf("service account %q", name),
		func(p *cantusv1alpha1.ToolSourcePolicy) bool {
			return slices.Contains(p.Spec.ServiceAccounts, name) || slices.Contains(p.Spec.ServiceAccounts, "*")
		},
		fmt.Sprintf("add %q to spec.serviceAccounts", name)))
}

// auditListed turns a refusal of a listed thing into an audited pass when a policy in
// Audit mode covers the namespace.
func (c *Checker) auditListed(d Decision) Decision {
	if d.Allowed {
		return d
	}
	for i := range c.Policies {
		if p := &c.Policies[i]; isAudit(p) {
			return Decision{Allowed: true, Reason: cantusv1alpha1.ReasonAllowedByAudit, Policy: p.Name,
				Message: "allowed only because policy " + p.Name + " is in Audit mode; Enforce would refuse it: " + d.Message}
		}
	}
	return d
}

// checkListed passes what the first Enforce policy allows (or else an Audit one).
func (c *Checker) checkListed(what string, allows func(*cantusv1alpha1.ToolSourcePolicy) bool, fix string) Decision {
	if len(c.Policies) == 0 {
		return c.noPolicy(what)
	}
	var audit *Decision
	for i := range c.Policies {
		p := &c.Policies[i]
		if !allows(p) {
			continue
		}
		d := Decision{Allowed: true, Reason: allowedReason(p), Message: allowedMessage(p, what), Policy: p.Name}
		if !isAudit(p) {
			return d
		}
		if audit == nil {
			audit = &d
		}
	}
	if audit != nil {
		return *audit
	}
	return Decision{
		Reason: cantusv1alpha1.ReasonNotAllowlisted,
		Message: fmt.Sprintf("no ToolSourcePolicy covering namespace %q allows %s; to allow it, %s of one ToolSourcePolicy that selects this namespace",
			c.Namespace, what, fix),
	}
}

// auditOr turns a refusal into an audited pass when an Audit policy covers the namespace.
// Audit still resolves the host and keeps the address floors (metadata, loopback,
// link-local, unspecified, multicast): the pass carries the checked addresses, so the
// connection goes exactly where the message says, and a floor refusal stays a refusal.
func (c *Checker) auditOr(ctx context.Context, host string, refusal Decision) Decision {
	for i := range c.Policies {
		p := &c.Policies[i]
		if !isAudit(p) {
			continue
		}
		addrs, err := c.resolve(ctx, host)
		if err != nil {
			return Decision{Reason: cantusv1alpha1.ReasonDNSError, Message: fmt.Sprintf("cannot resolve %s: %v", host, err)}
		}
		for _, a := range addrs {
			if kind, minBits := specialKind(a, nat64Prefixes(c.Policies)); kind != "" && !inNarrowCIDR(p.Spec.CIDRs, a, minBits) {
				return Decision{Reason: cantusv1alpha1.ReasonDeniedAddress, Message: fmt.Sprintf(
					"policy %s (Audit): %s resolves to %s, a %s address, which is refused in Audit mode too unless spec.cidrs names it", p.Name, host, a, kind)}
			}
		}
		return Decision{Allowed: true, Reason: cantusv1alpha1.ReasonAllowedByAudit, Policy: p.Name, Addresses: addrs,
			Message: "allowed only because policy " + p.Name + " is in Audit mode; Enforce would refuse it: " + refusal.Message}
	}
	return refusal
}

func (c *Checker) noPolicy(what string) Decision {
	return Decision{
		Reason: cantusv1alpha1.ReasonNoPolicy,
		Message: fmt.Sprintf("no ToolSourcePolicy selects namespace %q, so its imports are not allowed; create a ToolSourcePolicy whose namespaceSelector matches it and that allows %s",
			c.Namespace, what),
	}
}

func (c *Checker) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	resolver := c.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no addresses")
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}

func isAudit(p *cantusv1alpha1.ToolSourcePolicy) bool {
	return p.Spec.Mode == cantusv1alpha1.PolicyAudit
}

func allowedReason(p *cantusv1alpha1.ToolSourcePolicy) string {
	if isAudit(p) {
		return cantusv1alpha1.ReasonAllowedByAudit
	}
	return cantusv1alpha1.ReasonAllowed
}

func allowedMessage(p *cantusv1alpha1.ToolSourcePolicy, what string) string {
	return fmt.Sprintf("%s is allowed by ToolSourcePolicy %s", what, p.Name)
}

func portOf(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

func argv0(command []string) string {
	if len(command) == 0 {
		return ""
	}
	return command[0]
}

// hostListed matches exact names, IP literals, and "*.example.com", which matches one or
// more labels under example.com but not example.com itself.
func hostListed(patterns []string, host string) bool {
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(p, "."))
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if p == host {
			return true
		}
		if a, err := netip.ParseAddr(p); err == nil {
			if b, err := netip.ParseAddr(host); err == nil && a.Unmap() == b.Unmap() {
				return true
			}
		}
	}
	return false
}

// AuditOnly names the first Audit-mode policy when no Enforce policy covers the
// namespace, and is "" otherwise (Enforce, or no policy at all): refusals new in a
// version warn where it is set, and refuse where it is not.
func (c *Checker) AuditOnly() string {
	audit := ""
	for i := range c.Policies {
		if !isAudit(&c.Policies[i]) {
			return ""
		}
		if audit == "" {
			audit = c.Policies[i].Name
		}
	}
	return audit
}
