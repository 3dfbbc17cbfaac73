package memory

import (
	"encoding/json"
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

// The operator describes the memory tool from the contract (the catalog, the listing
// the verifier compares with what pods serve), the adapter serves the store's: for
// every rendered config the two are one definition.
func TestStoreServesTheToolTheContractDescribes(t *testing.T) {
	for _, m := range []adapterconfig.MemoryConfig{
		{},
		{ToolName: "notes", AllowedCommands: []string{CmdView, CmdCreate}, ConfirmCommands: []string{}, MaxFileBytes: 4096},
		{ReadOnly: true, MaxTotalBytes: 3 << 20, TrashRetention: adapterconfig.Duration{Duration: 48 * time.Hour}},
		{ConfirmCommands: []string{CmdStrReplace}, AllowedCommands: []string{CmdCreate, CmdStrReplace}},
	} {
		m.Root = t.TempDir()
		described, err := adapterconfig.NewMemoryTool(m)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(ConfigFrom(&m))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(described.Definition())
		got, _ := json.Marshal(s.Tool())
		_ = s.Close()
		if string(got) != string(want) {
			t.Errorf("config %+v: the store serves\n%s\nthe contract describes\n%s", m, got, want)
		}
	}
}
