package workload

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// BridgeAccess is who may call an import's stdio bridge.
type BridgeAccess struct {
	// Token is the bearer token the bridge requires (EnsureBridgeToken).
	Token string
	// SkillServers name the SkillServers of the import's namespace that import it: the
	// pods of their gateways may connect to the bridge.
	SkillServers []string
}

// tokenBytes is the token's entropy; base64url makes it 43 characters.
const tokenBytes = 32

// EnsureBridgeToken returns the bearer token of the import's bridge, from the Secret
// named like the bridge in the import's namespace. It creates that Secret, owned by the
// import, with a new random token when there is none, and writes a new token when the
// Secret holds none the bridge would accept (someone emptied or shortened it). A Secret
// of that name that the import does not control is a NameConflictError: the operator
// neither adopts nor reads someone else's. The token is never logged.
func EnsureBridgeToken(ctx context.Context, c client.Client, imp *cantusv1alpha1.RemoteToolImport) (string, error) {
	secret := ownedSecret{
		owner: imp, ownerKind: "RemoteToolImport", labels: bridgeLabels(imp), what: "the bridge's Secret",
		key: types.NamespacedName{Namespace: imp.Namespace, Name: BridgeName(imp)},
	}
	var token string
	err := secret.ensure(ctx, c, func(s *corev1.Secret) (bool, error) {
		if kept, ok := tokenIn(s); ok {
			token = kept
			return false, nil
		}
		fresh, err := newBridgeToken()
		if err != nil {
			return false, err
		}
		token, s.Data = fresh, bridgeSecretData(fresh)
		return true, nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

func newBridgeToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a bridge token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func bridgeSecretData(token string) map[string][]byte {
	return map[string][]byte{
		render.BridgeTokenKey:         []byte(token),
		render.BridgeAuthorizationKey: []byte("Bearer " + token),
	}
}

// tokenIn reads a token the operator would have written: 32 random bytes, base64url,
// and the header value that goes with it.
func tokenIn(s *corev1.Secret) (string, bool) {
	token := string(s.Data[render.BridgeTokenKey])
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != tokenBytes || string(s.Data[render.BridgeAuthorizationKey]) != "Bearer "+token {
		return "", false
	}
	return token, true
}

// tokenDigest identifies a token without revealing it: on the bridge's pod template it
// rolls the pod when the token changes (the container reads it at start).
func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}
