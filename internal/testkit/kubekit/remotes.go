package kubekit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// The configs of the adapters that play remotes for imports. The controller's tests run
// them as the adapter binary, the integration tests in process; both serve these.

// RemoteTool is one tool of a test remote: its description and input schema
// (BookSchema when empty).
type RemoteTool struct{ Description, Schema string }

// RemoteToolsConfig is a stateless remote "remote-library" 3.0.0 serving tools, each
// answering "<name> ok".
func RemoteToolsConfig(tools map[string]RemoteTool) *adapterconfig.Config {
	cfg := &adapterconfig.Config{Server: adapterconfig.ServerInfo{Name: "remote-library", Version: "3.0.0"}, Transport: adapterconfig.TransportStreamableHTTP, Stateless: true}
	for name, def := range tools {
		schema := def.Schema
		if schema == "" {
			schema = BookSchema
		}
		cfg.Tools = append(cfg.Tools, adapterconfig.Tool{Name: name, Description: def.Description, InputSchema: json.RawMessage(schema),
			Template: &adapterconfig.TemplateBackend{Text: name + " ok"}})
	}
	return cfg
}

// RemoteLibraryConfig is a stateless remote "remote-library" 2.0.0 with a working tool,
// search_book, and one whose backend fails with a 500, checkout. The failing backend
// stops when the test ends.
func RemoteLibraryConfig(t testing.TB) *adapterconfig.Config {
	t.Helper()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "catalog database is down", http.StatusInternalServerError)
	}))
	testkit.CloseAtEnd(t, failing)
	return &adapterconfig.Config{Server: adapterconfig.ServerInfo{Name: "remote-library", Version: "2.0.0"}, Transport: adapterconfig.TransportStreamableHTTP, Stateless: true,
		Tools: []adapterconfig.Tool{
			{Name: "search_book", Description: "Search by title.", InputSchema: json.RawMessage(BookSchema), Template: &adapterconfig.TemplateBackend{Text: "remote found: {{ .title }}"}},
			{Name: "checkout", Description: "Check a book out.", InputSchema: json.RawMessage(BookSchema),
				HTTP: &adapterconfig.HTTPBackend{URL: failing.URL, Timeout: adapterconfig.Duration{Duration: 5 * time.Second}, MaxResponseBytes: 1 << 20}},
		}}
}
