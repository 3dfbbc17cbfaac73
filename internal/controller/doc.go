// Package controller holds the reconcilers of the cantus.dev kinds.
//
// Files are named by the kind they reconcile: skillserver_*.go (SkillServer: its pods,
// content, auth, discovery, caller keys, and the Verified check of what its pods serve)
// and remotetoolimport_*.go (RemoteToolImport: probe, status, content, approval, stdio
// bridge, caller credentials, re-probes on list changes). What both kinds share has no
// prefix: status.go and status_written.go (the status computed in memory and written
// once, Ready's one rule, stalledAsTerminal), cache.go (what the manager's cache holds),
// remembered.go (what a reconciler keeps per object between reconciles), tracing.go and
// admissionparams.go. Condition types and reasons live in api/v1alpha1.
package controller
