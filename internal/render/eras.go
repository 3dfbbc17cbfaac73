package render

import (
	"encoding/json"
	"slices"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
)

// erasOf are the protocol eras the gateway may call the import in: those its last
// handshake found (status.eras) that the adapter knows. None (2025-11-25 only, as
// before eras were recorded) for a stdio import, whose bridge is the project's own.
func erasOf(imp *cantusv1alpha1.RemoteToolImport) []string {
	if imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio || imp.Spec.Transport == cantusv1alpha1.ImportTransportSSE {
		return nil
	}
	var out []string
	for _, era := range []string{adapterconfig.EraModern, adapterconfig.EraLegacy} {
		if slices.Contains(imp.Status.Eras, era) {
			out = append(out, era)
		}
	}
	return out
}

// toolEras are the eras of served (those the gateway may call the import in) that the
// remote lists the tool in, and its definition in 2026-07-28 where that differs from
// its main one. A tool whose definition of 2026-07-28 the status left out (too large)
// or that waits for approval is not served in that era.
func toolEras(d cantusv1alpha1.DiscoveredTool, served []string) ([]string, json.RawMessage) {
	if len(d.Eras) == 0 || len(served) == 0 {
		return served, nil
	}
	var modern json.RawMessage
	for _, e := range d.EraDefinitions {
		if e.Era == adapterconfig.EraModern && e.Definition != nil && e.Approval != cantusv1alpha1.ItemPending {
			modern = eraDefinition(e, e.Definition.Raw)
		}
	}
	missing := modern == nil && slices.ContainsFunc(d.EraDefinitions, func(e cantusv1alpha1.EraDefinition) bool { return e.Era == adapterconfig.EraModern })
	listed := d.Eras
	if missing && len(d.Eras) > 1 {
		listed = slices.DeleteFunc(slices.Clone(d.Eras), func(era string) bool { return era == adapterconfig.EraModern })
	}
	return itemEras(listed, served), modern
}

// itemEras are the eras of served (those the gateway may call the import in) that the
// remote lists an item in (listed; empty: every era of served). An item listed in none
// of them is served in all of served, its callers translated into the remote's era
// (RemoteBackend.ListedTo).
func itemEras(listed, served []string) []string {
	if len(listed) == 0 || len(served) == 0 {
		return served
	}
	var out []string
	for _, era := range served {
		if slices.Contains(listed, era) {
			out = append(out, era)
		}
	}
	if len(out) == 0 {
		return served
	}
	return out
}

// eraDefinition is what a gateway serves of a tool's definition of another era: the
// entry without its name, and, when that definition was approved, only the members its
// digest covers.
func eraDefinition(e cantusv1alpha1.EraDefinition, raw json.RawMessage) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil || members == nil {
		return nil
	}
	delete(members, "name")
	if e.Approval == cantusv1alpha1.ItemApproved {
		members = approvedMembers(definition.ToolKind, members)
	}
	out, err := json.Marshal(members)
	if err != nil {
		return nil
	}
	return out
}
