package render

import (
	"slices"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// extensionsOf are the extensions a gateway passes through for the import: the Tasks
// extension, when its last handshake found it announced by a remote that serves
// protocol 2026-07-28 (the era that has it).
func extensionsOf(imp *cantusv1alpha1.RemoteToolImport) []string {
	info := imp.Status.ServerInfo
	if info == nil || !slices.Contains(erasOf(imp), adapterconfig.EraModern) || !slices.Contains(info.Extensions, adapterconfig.ExtensionTasks) {
		return nil
	}
	return []string{adapterconfig.ExtensionTasks}
}
