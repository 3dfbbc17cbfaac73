package render

import (
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// TestMemoryDefaultsAreTheStores holds the API's memory defaults (which render writes
// into every config) to the contract's, which the memory store falls back to: a
// config that names no limit and one that names the default must behave alike.
func TestMemoryDefaultsAreTheStores(t *testing.T) {
	if cantusv1alpha1.DefaultMemoryToolName != adapterconfig.DefaultMemoryToolName ||
		cantusv1alpha1.DefaultMemoryMaxFileBytes != adapterconfig.DefaultMemoryMaxFileBytes ||
		cantusv1alpha1.DefaultMemoryMaxTotalBytes != adapterconfig.DefaultMemoryMaxTotalBytes ||
		cantusv1alpha1.DefaultMemoryTrashRetention != adapterconfig.DefaultMemoryTrashRetention {
		t.Errorf("the API's memory defaults (%s, %d, %d, %s) are not the contract's (%s, %d, %d, %s)",
			cantusv1alpha1.DefaultMemoryToolName, cantusv1alpha1.DefaultMemoryMaxFileBytes, cantusv1alpha1.DefaultMemoryMaxTotalBytes, cantusv1alpha1.DefaultMemoryTrashRetention,
			adapterconfig.DefaultMemoryToolName, adapterconfig.DefaultMemoryMaxFileBytes, adapterconfig.DefaultMemoryMaxTotalBytes, adapterconfig.DefaultMemoryTrashRetention)
	}
}
