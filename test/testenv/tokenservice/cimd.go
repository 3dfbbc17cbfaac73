package tokenservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// maxMetadataDocument bounds a Client ID Metadata Document: the draft asks servers to
// limit what they read.
const maxMetadataDocument = 64 << 10

// metadataDocument is a Client ID Metadata Document
// (draft-ietf-oauth-client-id-metadata-document): the client's registration, served
// by the client at its client_id.
type metadataDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ClientSecret            string   `json:"client_secret"`
}

// isMetadataDocumentURL says whether a client_id names a metadata document: an https
// URL with a path, or an http one on loopback (tests serve documents without TLS).
func isMetadataDocumentURL(clientID string) bool {
	u, err := url.Parse(clientID)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		return isLoopback(u.Hostname())
	}
	return false
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fetchMetadataDocument fetches a client's metadata document, on every lookup (no
// cache, so that a test sees a changed document at once), and makes it a public
// client. A document that does not name itself, has no redirect URI, or asks for a
// client authentication other than "none" is refused.
func (s *Server) fetchMetadataDocument(ctx context.Context, clientID string) (Client, error) {
	doc, err := s.getMetadataDocument(ctx, clientID)
	if err == nil {
		err = checkMetadataDocument(clientID, doc)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.documentFetches[clientID]++
	if err != nil {
		s.documentsRefused++
		return Client{}, oidc.ErrInvalidClient().WithDescription("client metadata document: %s", err.Error())
	}
	return Client{ID: clientID, Public: true, RedirectURIs: doc.RedirectURIs}, nil
}

func (s *Server) getMetadataDocument(ctx context.Context, clientID string) (*metadataDocument, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.documentClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch: status %d", resp.StatusCode)
	}
	var doc metadataDocument
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataDocument)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &doc, nil
}

func checkMetadataDocument(clientID string, doc *metadataDocument) error {
	switch {
	case doc.ClientID != clientID:
		return fmt.Errorf("client_id %q is not the document's URL %q", doc.ClientID, clientID)
	case len(doc.RedirectURIs) == 0:
		return errors.New("no redirect_uris")
	case doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != string(oidc.AuthMethodNone):
		return fmt.Errorf("token_endpoint_auth_method %q: only \"none\" is served", doc.TokenEndpointAuthMethod)
	case doc.ClientSecret != "":
		return errors.New("a metadata document must not hold a client_secret")
	case len(doc.GrantTypes) > 0 && !slices.Contains(doc.GrantTypes, string(oidc.GrantTypeCode)):
		return errors.New("grant_types lacks authorization_code")
	case len(doc.ResponseTypes) > 0 && !slices.Contains(doc.ResponseTypes, string(oidc.ResponseTypeCode)):
		return errors.New("response_types lacks code")
	}
	return nil
}

func (s *Server) documentClient() *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpClient != nil {
		return s.httpClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}
