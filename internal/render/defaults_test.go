package render

import (
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// TestMemoryDefaultsAreTheStores holds the API's memory defaults (which render writes
// into every config) to the memory store's own, which the adapter falls back to: a
// config that names no limit and one that names the default must behave alike.
func TestMemoryDefaultsAreTheStores(t *testing.T) {
	if cantusv1alpha1.DefaultMemoryToolName != memory.DefaultToolName ||
		cantusv1alpha1.DefaultMemoryMaxFileBytes != memory.DefaultMaxFileBytes ||
		cantusv1alpha1.DefaultMemoryMaxTotalBytes != memory.DefaultMaxTotalBytes ||
		cantusv1alpha1.DefaultMemoryTrashRetention != memory.DefaultTrashRetention {
		t.Errorf("the API's memory defaults (%s, %d, %d, %s) are not the store's (%s, %d, %d, %s)",
			cantusv1alpha1.DefaultMemoryToolName, cantusv1alpha1.DefaultMemoryMaxFileBytes, cantusv1alpha1.DefaultMemoryMaxTotalBytes, cantusv1alpha1.DefaultMemoryTrashRetention,
			memory.DefaultToolName, memory.DefaultMaxFileBytes, memory.DefaultMaxTotalBytes, memory.DefaultTrashRetention)
	}
}
