package render

import (
	"slices"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
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
