package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalMode says whether an import's definitions are served as the remote changes
// them or only once an owner approved them.
// +kubebuilder:validation:Enum=Automatic;Manual
type ApprovalMode string

const (
	// ApprovalAutomatic serves whatever the remote defines, as of its last handshake.
	ApprovalAutomatic ApprovalMode = "Automatic"
	// ApprovalManual serves only the definitions of an approved digest.
	ApprovalManual ApprovalMode = "Manual"
)

// DefinitionsDigestPattern is the form of a definitions digest: 64 lowercase hex digits
// (a SHA-256), as status.approval shows it.
const DefinitionsDigestPattern = `^[0-9a-f]{64}$`

// ImportApproval pins what an import serves to definitions an owner approved. An agent
// decides what to call, and how, from a tool's description and schema: a remote that
// changes them after they were vetted changes what every agent behind a gateway does.
// +kubebuilder:validation:XValidation:rule="self.mode == 'Manual' || (!has(self.digest) && !has(self.approveFirstSeen))",message="approval.digest and approval.approveFirstSeen apply to mode: Manual only"
type ImportApproval struct {
	// Mode is Automatic (serve the remote's definitions as they change) or Manual
	// (serve only approved definitions; hold changes until approved).
	// +kubebuilder:default=Automatic
	// +optional
	Mode ApprovalMode `json:"mode,omitempty"`
	// Digest approves the definitions whose digest this is: copy
	// status.approval.pendingDigest (or firstSeenDigest) here. DefinitionApproval
	// objects naming this import approve digests too.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`
	// ApproveFirstSeen approves the definitions of the first successful handshake in
	// Manual mode (trust on first use); later changes are held until approved.
	// +optional
	ApproveFirstSeen bool `json:"approveFirstSeen,omitempty"`
}

// ModeOrDefault is the approval mode: Mode, or Automatic.
func (a *ImportApproval) ModeOrDefault() ApprovalMode {
	if a == nil || a.Mode == "" {
		return ApprovalAutomatic
	}
	return a.Mode
}

// ItemApproval is the approval state of one item an import serves.
type ItemApproval string

const (
	// ItemAutomatic is served without approval (mode Automatic).
	ItemAutomatic ItemApproval = "Automatic"
	// ItemApproved is an item whose definition was approved: it is served.
	ItemApproved ItemApproval = "Approved"
	// ItemPending is a new or changed item awaiting approval: gateways withhold it.
	ItemPending ItemApproval = "Pending"
)

// DefinitionChangeKind says how an item differs from its approved definition.
// +kubebuilder:validation:Enum=Added;Changed;Removed
type DefinitionChangeKind string

// How an item differs from its approved definition: new, changed in some members, or
// no longer served by the remote.
const (
	DefinitionAdded   DefinitionChangeKind = "Added"
	DefinitionChanged DefinitionChangeKind = "Changed"
	DefinitionRemoved DefinitionChangeKind = "Removed"
)

// ApprovedItem is one item of the approved definitions: its per-item digest, and a
// short digest of each member so that a later change names the members it touched.
type ApprovedItem struct {
	// Kind of item: tool (prompts, resources and skills use the same record).
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Digest is the item's digest (64 hex digits).
	Digest string `json:"digest"`
	// Era, when set, says the record is of the item's definition in that protocol
	// era, which differs from its definition in the other (a tool of a dual-era
	// remote): the item is approved in both eras by one definitions digest.
	// +optional
	Era string `json:"era,omitempty"`
	// Members maps each member of the definition (title, description, inputSchema, …)
	// to the first 16 hex digits of its digest.
	// +optional
	Members map[string]string `json:"members,omitempty"`
}

// DefinitionChange is how one item the remote serves now differs from the approved one.
type DefinitionChange struct {
	Kind   string               `json:"kind"`
	Name   string               `json:"name"`
	Change DefinitionChangeKind `json:"change"`
	// Era names the protocol era of a change to an item's definition in that era
	// (ApprovedItem.Era).
	// +optional
	Era string `json:"era,omitempty"`
	// Members are the members of a Changed item that differ, old and new text clipped.
	// +listType=atomic
	// +optional
	Members []MemberChange `json:"members,omitempty"`
}

// MemberChange is one member of a definition that changed.
type MemberChange struct {
	// Member is title, description, inputSchema, outputSchema, annotations, …
	Member string `json:"member"`
	// Old is the approved text, clipped to 256 bytes (empty when absent or not recorded).
	// +optional
	Old string `json:"old,omitempty"`
	// New is the remote's text now, clipped to 256 bytes (empty when absent).
	// +optional
	New string `json:"new,omitempty"`
}

// ApprovalStatus says which definitions an import serves and which wait for approval.
// The operator never writes spec: an owner approves by copying a digest from here.
type ApprovalStatus struct {
	// Mode is the mode in effect.
	// +optional
	Mode ApprovalMode `json:"mode,omitempty"`
	// FirstSeenDigest is the digest of the definitions of the first successful
	// handshake in Manual mode.
	// +optional
	FirstSeenDigest string `json:"firstSeenDigest,omitempty"`
	// ApprovedDigest is the digest of the approved definitions that are served.
	// +optional
	ApprovedDigest string `json:"approvedDigest,omitempty"`
	// ApprovedBy says where the approval came from: spec.approval.digest,
	// spec.approval.approveFirstSeen, or DefinitionApproval/<name>.
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`
	// PendingDigest is the digest of the definitions the remote serves now, when they
	// are not all approved: setting spec.approval.digest (or a DefinitionApproval) to
	// it approves them.
	// +optional
	PendingDigest string `json:"pendingDigest,omitempty"`
	// Approved are the approved items, at most 1,000 (the most tools a handshake takes).
	// +listType=atomic
	// +optional
	Approved []ApprovedItem `json:"approved,omitempty"`
	// Changes are how the remote's definitions differ from the approved ones, at most
	// 64 of them; ChangeCount counts them all.
	// +listType=atomic
	// +optional
	Changes []DefinitionChange `json:"changes,omitempty"`
	// ChangeCount is the number of changes, also those Changes leaves out.
	// +optional
	ChangeCount int32 `json:"changeCount,omitempty"`
	// DigestVersion is the version of the item digests this record holds: 2 since they
	// cover every member a gateway serves (_meta, icons, execution). A record of an
	// earlier version is migrated at the first handshake after an upgrade (event
	// DigestMigrated); docs/upgrading.md says how.
	// +optional
	DigestVersion int32 `json:"digestVersion,omitempty"`
	// MigratedFrom is the approved digest that approvedDigest was migrated from when
	// item digests changed version: approvedDigest stays approved while that digest is
	// (spec.approval.digest, a DefinitionApproval, or the first seen).
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	MigratedFrom string `json:"migratedFrom,omitempty"`
}

// DefinitionApprovalSpec approves one digest of one import's definitions.
type DefinitionApprovalSpec struct {
	// ImportName is the RemoteToolImport in this namespace whose definitions this approves.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ImportName string `json:"importName"`
	// Digest is the approved definitions digest, copied from the import's
	// status.approval.pendingDigest.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +required
	Digest string `json:"digest"`
	// Reason records why, for the audit trail.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
}

// DefinitionApproval approves the definitions of a RemoteToolImport in Manual mode, as
// an object of its own so that RBAC can let one group edit imports and another approve
// what they serve.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=defapproval,categories=cantus
// +kubebuilder:printcolumn:name="Import",type=string,JSONPath=`.spec.importName`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.spec.digest`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DefinitionApproval struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec DefinitionApprovalSpec `json:"spec"`
}

// DefinitionApprovalList is a list of DefinitionApprovals.
// +kubebuilder:object:root=true
type DefinitionApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DefinitionApproval `json:"items"`
}

func init() {
	register(&DefinitionApproval{}, &DefinitionApprovalList{})
}
