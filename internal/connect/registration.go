package connect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// kindClient marks the Secret of a client the operator registered dynamically.
const kindClient = "client"

// registeredClient is a client the operator registered at an authorization server
// (RFC 7591), kept encrypted like the accounts.
type registeredClient struct {
	Issuer       string `json:"issuer"`
	RedirectURI  string `json:"redirectURI"`
	ClientID     string `json:"clientID"`
	ClientSecret string `json:"clientSecret,omitempty"`
}

// clientName is the Secret of the client registered at issuer for redirectURI: one per
// authorization server and callback, shared by every import that uses that server.
func clientName(issuer, redirectURI string) string {
	sum := sha256.Sum256([]byte(issuer + "\x00" + redirectURI))
	return "cantus-connect-c-" + hex.EncodeToString(sum[:16])
}

// registered is the operator's client at the authorization server: registered once at
// registrationURL, then read back. A record that no key opens any more is registered
// again. Two replicas registering at once keep the first one stored.
func (h *Handler) registered(ctx context.Context, hc *http.Client, issuer, registrationURL, redirectURI string) (*registeredClient, error) {
	name := clientName(issuer, redirectURI)
	secret := &corev1.Secret{}
	err := h.Store.Client.Get(ctx, types.NamespacedName{Namespace: h.Store.Namespace, Name: name}, secret)
	switch {
	case err == nil:
		var rc registeredClient
		if err := h.Store.open(ctx, secret, &rc); err == nil {
			return &rc, nil
		} else if errors.Is(err, ErrNoKeys) {
			return nil, err
		}
	case apierrors.IsNotFound(err):
		secret = nil
	default:
		return nil, fmt.Errorf("read the registered client: %w", err)
	}
	rc, err := register(ctx, hc, registrationURL, redirectURI)
	if err != nil {
		return nil, err
	}
	rc.Issuer = issuer
	if err := h.storeClient(ctx, name, rc, secret); err != nil {
		if apierrors.IsAlreadyExists(errors.Unwrap(err)) || apierrors.IsConflict(errors.Unwrap(err)) {
			return h.registered(ctx, hc, issuer, registrationURL, redirectURI)
		}
		return nil, err
	}
	h.Log.Info("registered the operator's client at an authorization server", "issuer", issuer)
	return rc, nil
}

func (h *Handler) storeClient(ctx context.Context, name string, rc *registeredClient, previous *corev1.Secret) error {
	keyID, box, err := h.Store.seal(ctx, name, rc)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.Store.Namespace, Name: name}}
	if previous != nil {
		secret = previous.DeepCopy()
	}
	secret.Labels = map[string]string{LabelAccount: kindClient, LabelKey: keyID, workload.LabelManagedBy: workload.FieldOwner}
	secret.Type = corev1.SecretTypeOpaque
	secret.Data = map[string][]byte{dataKey: box}
	if previous == nil {
		err = h.Store.Client.Create(ctx, secret)
	} else {
		err = h.Store.Client.Update(ctx, secret)
	}
	if err != nil {
		return fmt.Errorf("store the registered client: %w", err)
	}
	return nil
}

// register registers a public client (authorization code with PKCE, refresh tokens)
// whose only redirect URI is the operator's callback.
func register(ctx context.Context, hc *http.Client, registrationURL, redirectURI string) (*registeredClient, error) {
	body, _ := json.Marshal(map[string]any{
		"client_name":                "cantus operator",
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, registrationURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("registration request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("register the operator's client: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("register the operator's client: HTTP %d", resp.StatusCode)
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(&out); err != nil || out.ClientID == "" {
		return nil, errors.New("register the operator's client: the answer has no client_id")
	}
	return &registeredClient{RedirectURI: redirectURI, ClientID: out.ClientID, ClientSecret: out.ClientSecret}, nil
}

// callbackURL is the redirect URI under the operator's public base URL.
func (h *Handler) callbackURL() string {
	return h.baseURL() + adapterconfig.ConnectCallback
}
