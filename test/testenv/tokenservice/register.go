package tokenservice

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// registration is a dynamic client registration request and response (RFC 7591
// sections 2 and 3.2.1), the fields the service reads or answers.
type registration struct {
	ClientID                string   `json:"client_id,omitempty"`
	ClientSecret            string   `json:"client_secret,omitempty"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at,omitempty"`
	ClientSecretExpiresAt   *int64   `json:"client_secret_expires_at,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
}

// register is the dynamic client registration endpoint (RFC 7591), open to anyone: a
// client with redirect URIs, public ("none") or confidential (client_secret_basic, the
// default, which gets a secret).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req registration
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		registrationError(w, "invalid_client_metadata", "not a JSON client metadata document")
		return
	}
	if len(req.RedirectURIs) == 0 {
		registrationError(w, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	c := Client{ID: "dcr-" + randomID(), RedirectURIs: req.RedirectURIs}
	switch oidc.AuthMethod(req.TokenEndpointAuthMethod) {
	case oidc.AuthMethodNone:
		c.Public = true
	case "", oidc.AuthMethodBasic:
		c.Secret = randomID()
		req.TokenEndpointAuthMethod = string(oidc.AuthMethodBasic)
	default:
		registrationError(w, "invalid_client_metadata", "token_endpoint_auth_method must be none or client_secret_basic")
		return
	}
	s.mu.Lock()
	s.clients[c.ID] = c
	s.registrations++
	s.mu.Unlock()

	never := int64(0)
	req.ClientID, req.ClientSecret, req.ClientIDIssuedAt = c.ID, c.Secret, time.Now().Unix()
	if c.Secret != "" {
		req.ClientSecretExpiresAt = &never
	}
	req.GrantTypes = []string{string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken)}
	req.ResponseTypes = []string{string(oidc.ResponseTypeCode)}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(req)
}

func registrationError(w http.ResponseWriter, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}
