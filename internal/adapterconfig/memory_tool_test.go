package adapterconfig

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A config that names nothing gets the documented defaults; one read-only allows view
// alone; the description says the limits it enforces.
func TestNewMemoryToolAppliesTheDefaults(t *testing.T) {
	tool, err := NewMemoryTool(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if tool.Name != DefaultMemoryToolName || tool.MaxFileBytes != DefaultMemoryMaxFileBytes || tool.MaxTotalBytes != DefaultMemoryMaxTotalBytes ||
		tool.TrashRetention != DefaultMemoryTrashRetention || !slices.Equal(tool.Allowed, MemoryCommands) || !slices.Equal(tool.Confirm, DefaultMemoryConfirmCommands) {
		t.Errorf("defaults: %+v", tool)
	}
	def := tool.Definition()
	for _, want := range []string{"str_replace, delete, rename, create over an existing file", "files over 1 MiB", "a total over 64 MiB", "trash for 7 days"} {
		if !strings.Contains(def.Description, want) {
			t.Errorf("description lacks %q: %s", want, def.Description)
		}
	}
	readOnly, err := NewMemoryTool(MemoryConfig{ReadOnly: true, AllowedCommands: []string{"create"}, TrashRetention: Duration{Duration: 36 * time.Hour}})
	if err != nil || !slices.Equal(readOnly.Allowed, []string{"view"}) || !strings.Contains(readOnly.Definition().Description, "trash for 36 hours") {
		t.Errorf("read-only: %+v, %v", readOnly, err)
	}
}

// An unknown command or a negative limit is refused, naming what is wrong.
func TestNewMemoryToolRefusesWhatTheStoreCannotRun(t *testing.T) {
	for _, tc := range []struct {
		m    MemoryConfig
		want string
	}{
		{MemoryConfig{AllowedCommands: []string{"purge"}}, `unknown command "purge" in AllowedCommands`},
		{MemoryConfig{ConfirmCommands: []string{"drop"}}, `unknown command "drop" in ConfirmCommands`},
		{MemoryConfig{MaxFileBytes: -1}, "must not be negative"},
	} {
		if _, err := NewMemoryTool(tc.m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.m, err, tc.want)
		}
	}
}
