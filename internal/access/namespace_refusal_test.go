package access

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Deletions dropped in one namespace refuse the older tokens of that namespace only
// (issue 39, R12): a token of another namespace, issued as early, passes.
func TestDroppedRevocationsRefuseOnlyTheirNamespacesTokens(t *testing.T) {
	cluster := newTestIssuer(t, "https://kubernetes.default.svc", "k1")
	aud := []string{"room.library.skillserver.cantus.dev"}
	dropped := time.Now().Add(-30 * time.Second).Truncate(time.Second)
	a, err := New(Settings{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
		Kind: adapterconfig.IssuerServiceAccount, URL: cluster.url, Audiences: aud, JWKS: cluster.jwks(t),
		RefuseIssuedBeforeByNamespace: map[string]time.Time{"churn": dropped},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	// serviceAccountClaims issues the token a minute ago, before the drop.
	churner := cluster.token(t, aud, hour, serviceAccountClaims("churn", "reader"))
	if _, err := a.Authenticate(requestWith(churner)); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "issued before") {
		t.Errorf("an old token of the namespace whose deletions were dropped: got %v, want refused as issued before", err)
	}
	bystander := cluster.token(t, aud, hour, serviceAccountClaims("agents", "reader"))
	if _, err := a.Authenticate(requestWith(bystander)); err != nil {
		t.Errorf("an old token of another namespace was refused: %v", err)
	}
	bySubject := serviceAccountClaims("churn", "reader")
	delete(bySubject, "kubernetes.io") // the namespace is then read from the subject
	if _, err := a.Authenticate(requestWith(cluster.token(t, aud, hour, bySubject))); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("an old token of the namespace, named by its subject only: got %v, want refused", err)
	}
}
