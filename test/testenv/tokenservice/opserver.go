package tokenservice

import (
	"context"
	"net/url"
	"slices"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// opServer is the op package's legacy server with the service's stricter rules: PKCE
// with S256 on every authorization request and its verifier on every code exchange
// (the legacy server checks a confidential client's verifier only when one is sent),
// RFC 8707 resource indicators, no ID token unless "openid" was asked for, and the
// metadata fields the op package does not know.
type opServer struct {
	*op.LegacyServer
	s *Server
}

var _ op.ExtendedLegacyServer = (*opServer)(nil)

func (o *opServer) Authorize(ctx context.Context, r *op.ClientRequest[oidc.AuthRequest]) (*op.Redirect, error) {
	if r.Data.CodeChallenge == "" || r.Data.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE is required, with code_challenge_method S256")
	}
	resources := r.Form["resource"]
	if err := checkResources(resources); err != nil {
		return nil, err
	}
	return o.LegacyServer.Authorize(withResources(ctx, resources), r)
}

// checkResources refuses resource indicators that are not absolute URIs without a
// fragment (RFC 8707 section 2).
func checkResources(resources []string) error {
	for _, res := range resources {
		u, err := url.Parse(res)
		if err != nil || !u.IsAbs() || u.Fragment != "" {
			return oidc.ErrInvalidTarget().WithDescription("resource must be an absolute URI without a fragment")
		}
	}
	return nil
}

// sameResources checks a token request's resource parameters: any it names must have
// been granted (RFC 8707 section 2.2). They cannot narrow the audience here.
func sameResources(asked, granted []string) error {
	for _, res := range asked {
		if !slices.Contains(granted, res) {
			return oidc.ErrInvalidTarget().WithDescription("resource was not part of the grant")
		}
	}
	return nil
}

func (o *opServer) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	storage := o.Provider().Storage()
	req, err := op.AuthRequestByCode(ctx, storage, r.Data.Code)
	if err != nil {
		return nil, err
	}
	a, _ := req.(*authRequest)
	if err := op.AuthorizeCodeChallenge(r.Data.CodeVerifier, req.GetCodeChallenge()); err != nil {
		o.s.countPKCEFailure()
		// A code gets one try: a wrong verifier spends it.
		_ = storage.DeleteAuthRequest(ctx, req.GetID())
		return nil, err
	}
	if a != nil {
		if err := sameResources(r.Form["resource"], a.resources); err != nil {
			return nil, err
		}
	}
	resp, err := o.LegacyServer.CodeExchange(ctx, r)
	return withoutUnaskedIDToken(resp, req.GetScopes()), err
}

func (o *opServer) RefreshToken(ctx context.Context, r *op.ClientRequest[oidc.RefreshTokenRequest]) (*op.Response, error) {
	resp, err := o.LegacyServer.RefreshToken(ctx, r)
	if err != nil {
		return nil, err
	}
	return withoutUnaskedIDToken(resp, r.Data.Scopes), nil
}

// withoutUnaskedIDToken drops the ID token the op package always issues, unless the
// client asked for "openid": an OAuth client of an MCP server wants none.
func withoutUnaskedIDToken(resp *op.Response, scopes []string) *op.Response {
	if resp == nil {
		return nil
	}
	if tokens, ok := resp.Data.(*oidc.AccessTokenResponse); ok && !slices.Contains(scopes, oidc.ScopeOpenID) {
		tokens.IDToken = ""
	}
	return resp
}

// metadata is the authorization server metadata (RFC 8414) with the fields the op
// package does not know.
type metadata struct {
	*oidc.DiscoveryConfiguration
	// ClientIDMetadataDocumentSupported says that a client_id may be the https URL of a
	// Client ID Metadata Document (draft-ietf-oauth-client-id-metadata-document).
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported"`
}

func (o *opServer) Discovery(ctx context.Context, r *op.Request[struct{}]) (*op.Response, error) {
	resp, err := o.LegacyServer.Discovery(ctx, r)
	if err != nil {
		return nil, err
	}
	cfg, ok := resp.Data.(*oidc.DiscoveryConfiguration)
	if !ok {
		return resp, nil
	}
	cfg.RegistrationEndpoint = o.s.issuer + registerPath
	resp.Data = metadata{DiscoveryConfiguration: cfg, ClientIDMetadataDocumentSupported: true}
	return resp, nil
}
