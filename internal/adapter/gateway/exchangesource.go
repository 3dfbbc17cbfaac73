package gateway

import (
	"fmt"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

func newExchangeSource(importRef string, _ *adapterconfig.TokenExchange) (CredentialSource, error) {
	return nil, fmt.Errorf("import %s: token exchange is not wired yet", importRef)
}
