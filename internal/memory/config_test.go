package memory

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The operator checks a config's memory commands against the contract's list, the store
// serves its own: the two must name the same commands in the same order.
func TestContractNamesTheStoresCommands(t *testing.T) {
	if !slices.Equal(adapterconfig.MemoryCommands, AllCommands) {
		t.Errorf("adapterconfig.MemoryCommands = %v, the store serves %v", adapterconfig.MemoryCommands, AllCommands)
	}
}

// Every field of the rendered memory config reaches the store's config.
func TestConfigFrom(t *testing.T) {
	rendered := &adapterconfig.MemoryConfig{
		Root:            "/var/lib/memory",
		ToolName:        "notes",
		AllowedCommands: []string{CmdView, CmdCreate},
		ConfirmCommands: []string{},
		ReadOnly:        true,
		MaxFileBytes:    4096,
		MaxTotalBytes:   1 << 20,
		TrashRetention:  adapterconfig.Duration{Duration: 48 * time.Hour},
	}
	want := Config{Root: "/var/lib/memory", ToolName: "notes", Guard: Guard{
		AllowedCommands: []string{CmdView, CmdCreate},
		ConfirmCommands: []string{},
		ReadOnly:        true,
		MaxFileBytes:    4096,
		MaxTotalBytes:   1 << 20,
		TrashRetention:  48 * time.Hour,
	}}
	if got := ConfigFrom(rendered); !reflect.DeepEqual(got, want) {
		t.Errorf("ConfigFrom = %+v, want %+v", got, want)
	}
}
