package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyMode says whether a policy refuses what it does not allow.
// +kubebuilder:validation:Enum=Enforce;Audit
type PolicyMode string

const (
	// PolicyEnforce refuses imports the policy does not allow.
	PolicyEnforce PolicyMode = "Enforce"
	// PolicyAudit lets them through and says in SourceAllowed that enforcement would refuse
	// them. Refused addresses (cloud metadata, link-local, loopback, outside spec.cidrs)
	// stay refused in Audit mode.
	PolicyAudit PolicyMode = "Audit"
)

// ToolSourcePolicySpec is an allowlist of remote MCP sources.
type ToolSourcePolicySpec struct {
	// NamespaceSelector picks the namespaces whose imports this policy governs; empty
	// selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Mode is Enforce (default) or Audit.
	// +kubebuilder:default=Enforce
	// +optional
	Mode PolicyMode `json:"mode,omitempty"`

	// Hosts allowed in import URLs: exact names ("mcp.example.com"), wildcards
	// ("*.example.com" matches one or more labels), or IP literals.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || self.matches('^(\\\\*\\\\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\\\\.?$')",message="each hosts entry must be a host name (mcp.example.com), a wildcard of whole labels at the front (*.example.com) or an IP address: no scheme, port, path, or wildcard elsewhere; ports go in spec.ports"
	// +optional
	Hosts []string `json:"hosts,omitempty"`

	// Ports allowed; empty allows any port.
	// +listType=set
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +optional
	Ports []int32 `json:"ports,omitempty"`

	// CIDRs every resolved address of an allowed host must fall in; empty means any
	// address except link-local, loopback and cloud metadata ones, which must be listed
	// here to be reachable.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="each cidrs entry must be a CIDR such as 10.0.0.0/8 or fd00::/8"
	// +optional
	CIDRs []string `json:"cidrs,omitempty"`

	// NAT64Prefixes are this cluster's own (network-specific) NAT64 prefixes, IPv6 CIDRs
	// of a length RFC 6052 defines (/32, /40, /48, /56, /64 or /96). An address under
	// one carries an IPv4 address where RFC 6052 puts it for that length, and that
	// address is checked too: a translator would deliver 2001:db8:64::a9fe:a9fe to the
	// metadata endpoint 169.254.169.254. The well-known prefix 64:ff9b::/96 and the
	// local-use 64:ff9b:1::/48 are always seen through. The prefixes of every policy
	// covering a namespace apply to each of them.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 6 && [32, 40, 48, 56, 64, 96].exists(l, l == cidr(self).prefixLength())",message="each nat64Prefixes entry must be an IPv6 CIDR of length /32, /40, /48, /56, /64 or /96 (RFC 6052), such as 2001:db8:64::/96"
	// +optional
	NAT64Prefixes []string `json:"nat64Prefixes,omitempty"`

	// Images allowed for stdio imports, for a SkillServer's spec.pod.image and for agent
	// skills mounted from images: a registry ("ghcr.io"), a repository prefix
	// matched at a path boundary ("ghcr.io/acme" allows "ghcr.io/acme/srv" but not
	// "ghcr.io/acme-evil/srv"), or an exact reference with a tag or digest. References are
	// normalised first ("nginx" is "docker.io/library/nginx").
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:XValidation:rule="!self.contains('://') && !self.matches('[\\\\s*?]')",message="each images entry is a registry, a repository or a reference such as ghcr.io/acme/srv:1: no scheme (https://), no spaces, no wildcards"
	// +optional
	Images []string `json:"images,omitempty"`

	// Commands allowed for stdio imports, by argv[0] ("npx", "/usr/local/bin/server").
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('[\\\\s|><&;$`]')",message="each commands entry is one argv[0] such as npx or /usr/local/bin/server: no spaces or shell metacharacters (arguments are not matched)"
	// +optional
	Commands []string `json:"commands,omitempty"`

	// ServiceAccounts a SkillServer in a selected namespace may run its pods under
	// (spec.pod.serviceAccountName), by name in the server's own namespace; "*" allows
	// any. A pod without a mounted token still carries the account's identity for
	// image pull secrets and cloud workload identity, so it is allowed on purpose.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self == '*' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="each serviceAccounts entry is a service account name such as agent-runner, or * for any"
	// +optional
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
}

// ToolSourcePolicy allows remote MCP sources for the namespaces it selects. With no policy
// covering a namespace, its imports are not allowed.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tsp,categories=cantus
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Hosts",type=string,JSONPath=`.spec.hosts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ToolSourcePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec ToolSourcePolicySpec `json:"spec"`
}

// ToolSourcePolicyList is a list of ToolSourcePolicies.
// +kubebuilder:object:root=true
type ToolSourcePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolSourcePolicy `json:"items"`
}

func init() {
	register(&ToolSourcePolicy{}, &ToolSourcePolicyList{})
}
