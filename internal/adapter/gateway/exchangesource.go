package gateway

import (
	"context"
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
)

// exchangeSource exchanges each caller's verified token (RFC 8693) for a token for the
// remote, cached per caller until shortly before it expires (callercred).
type exchangeSource struct {
	importRef string
	exchanger *callercred.Exchanger
}

func newExchangeSource(importRef string, cfg *adapterconfig.TokenExchange, tokens *callercred.Cache, metrics *callercred.Metrics) (CredentialSource, error) {
	ex, err := callercred.NewExchanger(cfg, callercred.Options{Name: importRef, Cache: tokens, Metrics: metrics})
	if err != nil {
		return nil, fmt.Errorf("import %s: token exchange: %w", importRef, err)
	}
	return &exchangeSource{importRef: importRef, exchanger: ex}, nil
}

func (s *exchangeSource) Credential(ctx context.Context, caller *access.Caller) (string, error) {
	token, err := s.exchanger.Token(ctx, caller.Identity(), caller.SubjectToken())
	if err != nil {
		return "", &CallerCredentialError{Code: CodeTokenExchangeFailed, Message: fmt.Sprintf(
			"import %s acts as each caller at its remote, and exchanging this caller's token failed: %s; nothing was sent to the remote",
			s.importRef, err.Error())}
	}
	return token, nil
}

func (s *exchangeSource) Forget(identity string) { s.exchanger.Forget(identity) }

func (s *exchangeSource) Close() { s.exchanger.Close() }
