package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ServerMetadata is what the operator uses of an authorization server's metadata
// (RFC 8414).
type ServerMetadata struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	RevocationEndpoint    string `json:"revocation_endpoint,omitempty"`
	RegistrationEndpoint  string `json:"registration_endpoint,omitempty"`
	// JWKSURI holds the keys the server signs ID tokens with.
	JWKSURI string `json:"jwks_uri,omitempty"`
	// MetadataDocuments: the server says it takes Client ID Metadata Documents.
	MetadataDocuments bool `json:"client_id_metadata_document_supported,omitempty"`
	// Discovered: the issuer came from the remote's protected-resource metadata.
	Discovered bool `json:"-"`
}

// maxMetadataBytes bounds a metadata document read.
const maxMetadataBytes = 256 << 10

// Discover reads the metadata of the authorization server issuer, or, when issuer is
// empty, of the first one the remote names in its protected-resource metadata
// (RFC 9728).
func Discover(ctx context.Context, hc *http.Client, remoteURL, issuer string) (ServerMetadata, error) {
	discovered := false
	if issuer == "" {
		var err error
		if issuer, err = protectedResourceIssuer(ctx, hc, remoteURL); err != nil {
			return ServerMetadata{}, err
		}
		discovered = true
	}
	var md ServerMetadata
	var errs []error
	for _, u := range metadataURLs(issuer) {
		err := getJSON(ctx, hc, u, &md)
		if err == nil {
			break
		}
		errs = append(errs, err)
	}
	if md.Issuer == "" {
		return ServerMetadata{}, fmt.Errorf("read the metadata of authorization server %s: %w", issuer, errors.Join(errs...))
	}
	if strings.TrimSuffix(md.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
		return ServerMetadata{}, fmt.Errorf("the metadata of authorization server %s names another issuer, %s", issuer, md.Issuer)
	}
	if md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
		return ServerMetadata{}, fmt.Errorf("authorization server %s has no authorization or token endpoint in its metadata", issuer)
	}
	md.Discovered = discovered
	return md, nil
}

// protectedResourceIssuer is the first authorization server of the remote's RFC 9728
// metadata: at /.well-known/oauth-protected-resource followed by the remote's path,
// then at the host's root.
func protectedResourceIssuer(ctx context.Context, hc *http.Client, remoteURL string) (string, error) {
	u, err := url.Parse(remoteURL)
	if err != nil {
		return "", fmt.Errorf("remote URL: %w", err)
	}
	candidates := []string{wellKnown(u, "oauth-protected-resource", true), wellKnown(u, "oauth-protected-resource", false)}
	var errs []error
	for _, c := range candidates {
		var md struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if err := getJSON(ctx, hc, c, &md); err != nil {
			errs = append(errs, err)
			continue
		}
		if len(md.AuthorizationServers) > 0 {
			return md.AuthorizationServers[0], nil
		}
		errs = append(errs, fmt.Errorf("%s names no authorization server", c))
	}
	return "", fmt.Errorf("no authorization server is configured and the remote's protected-resource metadata names none: %w", errors.Join(errs...))
}

// metadataURLs are where an issuer's metadata may be: RFC 8414, then OpenID Connect.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	return []string{wellKnown(u, "oauth-authorization-server", true), strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"}
}

// wellKnown inserts /.well-known/<name> between the host and the path (RFC 8615 as
// RFC 8414 and RFC 9728 use it), or drops the path.
func wellKnown(u *url.URL, name string, withPath bool) string {
	out := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/" + name}
	if p := strings.TrimSuffix(u.Path, "/"); withPath && p != "" {
		out.Path += p
	}
	return out.String()
}

func getJSON(ctx context.Context, hc *http.Client, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(into); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
