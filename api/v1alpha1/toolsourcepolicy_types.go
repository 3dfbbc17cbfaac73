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

	// Images allowed for stdio imports, by prefix ("ghcr.io/acme/").
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Images []string `json:"images,omitempty"`

	// Commands allowed for stdio imports, by argv[0] ("npx", "/usr/local/bin/server").
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	// +optional
	Commands []string `json:"commands,omitempty"`
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
	SchemeBuilder.Register(&ToolSourcePolicy{}, &ToolSourcePolicyList{})
}
