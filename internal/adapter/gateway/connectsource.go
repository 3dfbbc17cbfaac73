package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
)

// connectSource gives each caller the access token of the account they connected at
// the remote's authorization server, fetched from the operator (which alone holds and
// refreshes it) and cached until shortly before it expires (callercred.Connector). A
// caller who has not connected gets a connect_required error carrying where to.
type connectSource struct {
	importRef string
	// server is the authorization server callers connect at, for the messages.
	server    string
	connector *callercred.Connector
}

func newConnectSource(importRef string, cfg *adapterconfig.Connect, tokens *callercred.Cache, metrics *callercred.Metrics) (CredentialSource, error) {
	c, err := callercred.NewConnector(importRef, cfg, callercred.Options{Name: importRef, Cache: tokens, Metrics: metrics})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", importRef, err)
	}
	return &connectSource{importRef: importRef, server: cfg.AuthorizationServer, connector: c}, nil
}

func (s *connectSource) Credential(ctx context.Context, caller *access.Caller) (string, error) {
	token, err := s.connector.Token(ctx, caller.Identity())
	if err == nil {
		return token, nil
	}
	var required *callercred.ConnectRequired
	if errors.As(err, &required) {
		at := ""
		if s.server != "" {
			at = " at " + s.server
		}
		return "", &CallerCredentialError{Code: CodeConnectRequired, Message: fmt.Sprintf(
			"import %s acts at its remote as each caller's own account, and this caller has not connected one%s (or must connect it again); nothing was sent to the remote",
			s.importRef, at),
			Connect: &ConnectPrompt{URL: required.URL, Expires: required.Expires, Message: required.Message, ServiceAccount: caller.ServiceAccount != "",
				Ask: fmt.Sprintf("Connect your account%s, so that calls through import %s act as you at its remote; then continue.", at, s.importRef)}}
	}
	return "", &CallerCredentialError{Code: CodeConnectUnavailable, Message: fmt.Sprintf(
		"import %s acts at its remote as each caller's connected account, and the gateway could not get this caller's token from the operator: %s; nothing was sent to the remote (if this lasts, the operator's connect endpoint is down or refuses this gateway)",
		s.importRef, err.Error())}
}

func (s *connectSource) Forget(identity string) { s.connector.Forget(identity) }

func (s *connectSource) Close() { s.connector.Close() }
