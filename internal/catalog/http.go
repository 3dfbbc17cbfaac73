package catalog

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/mark3labs/mcp-go/server"
)

type handler struct {
	catalog *Catalog
	reviews *reviews
	log     logr.Logger
}

// NewHandler serves the catalog:
//
//	GET /v1/servers                                  servers and what they serve
//	GET /v1/servers/{namespace}/{name}               one server
//	GET /v1/tools?q=WORDS                            tools whose name or description has every word
//	GET /v1/servers/{namespace}/{name}/tools/{tool}?format=F   one tool in a framework's shape
//	/mcp                                             the same as an MCP server (streamable HTTP)
//
// Every route needs a Kubernetes bearer token.
func NewHandler(c *Catalog, a *Authorizer, log logr.Logger) http.Handler {
	return newHandler(c, a, log)
}

func newHandler(c *Catalog, a authorizer, log logr.Logger) http.Handler {
	h := &handler{catalog: c, reviews: newReviews(a, c), log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/servers", h.listServers)
	mux.HandleFunc("GET /v1/servers/{namespace}/{name}", h.getServer)
	mux.HandleFunc("GET /v1/tools", h.searchTools)
	mux.HandleFunc("GET /v1/servers/{namespace}/{name}/tools/{tool}", h.getTool)
	h.registerRegistry(mux) // the MCP Registry API, /v0.1/servers (registry.go)
	mcpServer := server.NewStreamableHTTPServer(newMCPServer(c),
		server.WithStateLess(true),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, viewerKey{}, viewerFrom(r.Context()))
		}))
	mux.Handle("/mcp", mcpServer)
	return h.authenticate(mux)
}

func (h *handler) listServers(w http.ResponseWriter, r *http.Request) {
	servers, err := h.catalog.Servers(r.Context(), viewerFrom(r.Context()))
	if err != nil {
		h.fail(w, err, http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, map[string]any{"servers": nonNil(servers)})
}

func (h *handler) getServer(w http.ResponseWriter, r *http.Request) {
	servers, err := h.catalog.Servers(r.Context(), viewerFrom(r.Context()))
	if err != nil {
		h.fail(w, err, http.StatusServiceUnavailable)
		return
	}
	s, err := FindServer(servers, r.PathValue("namespace")+"/"+r.PathValue("name"))
	if err != nil {
		h.fail(w, err, http.StatusNotFound)
		return
	}
	writeJSON(w, s)
}

func (h *handler) searchTools(w http.ResponseWriter, r *http.Request) {
	servers, err := h.catalog.Servers(r.Context(), viewerFrom(r.Context()))
	if err != nil {
		h.fail(w, err, http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, map[string]any{"tools": nonNil(Search(servers, r.URL.Query().Get("q")))})
}

func (h *handler) getTool(w http.ResponseWriter, r *http.Request) {
	servers, err := h.catalog.Servers(r.Context(), viewerFrom(r.Context()))
	if err != nil {
		h.fail(w, err, http.StatusServiceUnavailable)
		return
	}
	ref := r.PathValue("namespace") + "/" + r.PathValue("name")
	rendered, err := RenderTool(servers, ref, r.PathValue("tool"), r.URL.Query().Get("format"))
	if err != nil {
		h.fail(w, err, http.StatusNotFound)
		return
	}
	writeJSON(w, rendered)
}

func (h *handler) fail(w http.ResponseWriter, err error, status int) {
	h.log.V(1).Info("catalog request failed", "status", status, "error", err.Error())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
