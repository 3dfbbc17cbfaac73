package access

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/egress"
)

// Discovery of an OIDC issuer is retried after a failure with this backoff, not on every
// request: a down issuer must not make every caller wait for a fetch.
const (
	firstDiscoveryRetry = 2 * time.Second
	maxDiscoveryRetry   = 5 * time.Minute
	discoveryTimeout    = 10 * time.Second
)

// signingAlgs are the algorithms a token may be signed with; "none" and the HMAC ones
// (a shared secret, not an issuer's key) are not among them.
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
}

// issuer verifies the tokens of one JWT issuer.
type issuer struct {
	cfg     adapterconfig.Issuer
	revoked map[string]bool

	mu        sync.Mutex
	verifier  *oidc.IDTokenVerifier
	keySet    *cooledKeySet // discovered issuers only
	nextTry   time.Time
	backoff   time.Duration
	lastError error
}

func newIssuer(cfg adapterconfig.Issuer) (*issuer, error) {
	i := &issuer{cfg: cfg, revoked: make(map[string]bool, len(cfg.RevokedUIDs)+len(cfg.RevokedServiceAccountUIDs))}
	for _, uid := range cfg.RevokedUIDs {
		i.revoked[uid] = true
	}
	for _, uid := range cfg.RevokedServiceAccountUIDs {
		i.revoked[uid] = true
	}
	if len(cfg.JWKS) == 0 {
		return i, nil // discovered on first need
	}
	keys, err := publicKeys(cfg.JWKS)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", cfg.URL, err)
	}
	i.verifier = oidc.NewVerifier(cfg.URL, &oidc.StaticKeySet{PublicKeys: keys},
		&oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: signingAlgs})
	return i, nil
}

func publicKeys(jwks json.RawMessage) ([]crypto.PublicKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, fmt.Errorf("the key set is not a JWKS: %w", err)
	}
	var keys []crypto.PublicKey
	for _, k := range set.Keys {
		if k.Valid() && k.IsPublic() {
			keys = append(keys, k.Key)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the key set holds no public keys")
	}
	return keys, nil
}

// verify checks the token's signature, issuer, expiry and audience, and says who it names.
func (i *issuer) verify(ctx context.Context, raw string) (*Caller, error) {
	v, err := i.currentVerifier()
	if err != nil {
		return nil, err
	}
	token, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("token refused: %w", err)
	}
	if !slices.ContainsFunc(token.Audience, func(a string) bool { return slices.Contains(i.cfg.Audiences, a) }) {
		return nil, errors.New("token refused: it was not issued for this server's audience")
	}
	var claims map[string]any
	if err := token.Claims(&claims); err != nil {
		return nil, fmt.Errorf("token claims: %w", err)
	}
	if i.cfg.Kind == adapterconfig.IssuerServiceAccount {
		if err := i.checkBinding(token); err != nil {
			return nil, err
		}
		c, err := serviceAccountCaller(token, claims)
		if err != nil {
			return nil, err
		}
		c.token = raw
		return c, nil
	}
	if isServiceAccountToken(token.Subject, claims) {
		return nil, errServiceAccountTokenAsOIDC
	}
	return &Caller{Kind: adapterconfig.IssuerOIDC, Subject: token.Subject, Issuer: token.Issuer,
		Groups: oidcGroups(stringsOf(claims["groups"]), i.cfg.GroupsPrefix), Claims: claims, token: raw}, nil
}

// errServiceAccountTokenAsOIDC refuses a Kubernetes service-account token presented to
// an OIDC issuer: only the service-account issuer checks what such a token is bound to
// and keeps its audience to this server, so an OIDC issuer at the cluster's URL (however
// configured) must not take the cluster's tokens, the API server's among them.
var errServiceAccountTokenAsOIDC = errors.New("token refused: it is a Kubernetes service-account token, accepted only through spec.auth.serviceAccountTokens")

// isServiceAccountToken says whether a token carries what the API server puts in the
// service-account tokens it issues: the projected tokens' "kubernetes.io" claim, the
// legacy tokens' "kubernetes.io/serviceaccount/..." claims, or a service account's
// subject.
func isServiceAccountToken(subject string, claims map[string]any) bool {
	if strings.HasPrefix(subject, "system:serviceaccount:") {
		return true
	}
	for k := range claims {
		if k == "kubernetes.io" || strings.HasPrefix(k, "kubernetes.io/") {
			return true
		}
	}
	return false
}

// oidcGroups are an OIDC token's groups as rules see them: prefixed, and without any
// "system:" group, which names Kubernetes identities (system:serviceaccounts:prod)
// that an identity provider must not be able to claim. Both the claimed group and the
// prefixed one are checked: a prefix "s" and a group "ystem:masters" spell one too.
func oidcGroups(claimed []string, prefix string) []string {
	groups := make([]string, 0, len(claimed))
	for _, g := range claimed {
		if strings.HasPrefix(g, kubernetesGroupPrefix) || strings.HasPrefix(prefix+g, kubernetesGroupPrefix) {
			continue
		}
		groups = append(groups, prefix+g)
	}
	return groups
}

// kubernetesGroupPrefix begins the groups Kubernetes reserves for its own identities.
const kubernetesGroupPrefix = "system:"

// checkBinding refuses a service-account token that lives longer than the revocations
// are remembered, or whose service account or pod was deleted: what the API server
// checks against its own store, the adapter checks against the deletions the operator
// saw.
func (i *issuer) checkBinding(token *oidc.IDToken) error {
	if err := refuseUnwatchedBinding(token); err != nil {
		return err
	}
	if err := i.checkIssueTime(token); err != nil {
		return err
	}
	if len(i.revoked) == 0 {
		return nil
	}
	var bound struct {
		Kubernetes struct {
			ServiceAccount struct {
				UID string `json:"uid"`
			} `json:"serviceaccount"`
			Pod *struct {
				UID string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	_ = token.Claims(&bound)
	switch {
	case i.revoked[bound.Kubernetes.ServiceAccount.UID]:
		return errors.New("token refused: its service account was deleted")
	case bound.Kubernetes.Pod != nil && i.revoked[bound.Kubernetes.Pod.UID]:
		return errors.New("token refused: the pod it was issued to was deleted")
	}
	return nil
}

// refuseUnwatchedBinding refuses a token bound to a Secret, or to a Node and no pod: the
// API server refuses it once that object is deleted, but the operator watches only
// service-account and pod deletions, so this server could not. A pod's projected token
// names its node too and is accepted; so is an unbound one (kubectl create token).
func refuseUnwatchedBinding(token *oidc.IDToken) error {
	var bound struct {
		Kubernetes struct {
			Secret *struct {
				Name string `json:"name"`
			} `json:"secret"`
			Node *struct {
				Name string `json:"name"`
			} `json:"node"`
			Pod *struct {
				Name string `json:"name"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	_ = token.Claims(&bound)
	switch k := bound.Kubernetes; {
	case k.Secret != nil:
		return errors.New("token refused: it is bound to a Secret, whose deletion this server cannot see; use a pod's projected token or kubectl create token")
	case k.Node != nil && k.Pod == nil:
		return errors.New("token refused: it is bound to a Node and no pod, whose deletion this server cannot see; use a pod's projected token or kubectl create token")
	}
	return nil
}

// checkIssueTime refuses a service-account token that lives longer than the revocations
// are remembered, or that was issued before the operator had to drop deletions (any of
// which it may be bound to).
func (i *issuer) checkIssueTime(token *oidc.IDToken) error {
	limit, before := i.cfg.MaxTokenLifetime, i.refuseIssuedBefore(token)
	if limit == nil && before == nil {
		return nil
	}
	var times struct {
		IssuedAt int64 `json:"iat"`
	}
	if err := token.Claims(&times); err != nil || times.IssuedAt == 0 {
		return errors.New("token refused: it has no issue time (iat)")
	}
	issued := time.Unix(times.IssuedAt, 0)
	if limit != nil {
		if lifetime := token.Expiry.Sub(issued); lifetime > limit.Duration {
			return fmt.Errorf("token refused: it is valid for %s, longer than the %s this server accepts; ask for a shorter one (kubectl create token --duration, or the projected token's expirationSeconds)", lifetime.Round(time.Second), limit.Duration)
		}
	}
	if before != nil && issued.Before(*before) {
		return fmt.Errorf("token refused: it was issued before %s, when the operator had more deletions of service accounts and pods than it keeps; get a new token", before.UTC().Format(time.RFC3339))
	}
	return nil
}

// refuseIssuedBefore is the time before which the token's namespace has its tokens
// refused (the later of the namespace's and, from older operators, the global one); nil
// when none is.
func (i *issuer) refuseIssuedBefore(token *oidc.IDToken) *time.Time {
	before := i.cfg.RefuseIssuedBefore
	if len(i.cfg.RefuseIssuedBeforeByNamespace) == 0 {
		return before
	}
	if at, ok := i.cfg.RefuseIssuedBeforeByNamespace[tokenNamespace(token)]; ok && (before == nil || at.After(*before)) {
		return &at
	}
	return before
}

// tokenNamespace is the namespace of a service-account token: its kubernetes.io claim,
// else its subject (system:serviceaccount:<namespace>:<name>).
func tokenNamespace(token *oidc.IDToken) string {
	var k8s struct {
		Kubernetes struct {
			Namespace string `json:"namespace"`
		} `json:"kubernetes.io"`
	}
	_ = token.Claims(&k8s)
	if ns := k8s.Kubernetes.Namespace; ns != "" {
		return ns
	}
	if parts := strings.Split(token.Subject, ":"); len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" {
		return parts[2]
	}
	return ""
}

// serviceAccountCaller names the account of a Kubernetes service-account token, in the
// groups the API server would put it in.
func serviceAccountCaller(token *oidc.IDToken, claims map[string]any) (*Caller, error) {
	var k8s struct {
		Kubernetes struct {
			Namespace      string `json:"namespace"`
			ServiceAccount struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"serviceaccount"`
		} `json:"kubernetes.io"`
		LegacyUID string `json:"kubernetes.io/serviceaccount/service-account.uid"`
	}
	_ = token.Claims(&k8s)
	ns, name := k8s.Kubernetes.Namespace, k8s.Kubernetes.ServiceAccount.Name
	uid := k8s.Kubernetes.ServiceAccount.UID
	if uid == "" {
		uid = k8s.LegacyUID
	}
	if ns == "" || name == "" {
		parts := strings.Split(token.Subject, ":")
		if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
			return nil, errors.New("token refused: it names no service account")
		}
		ns, name = parts[2], parts[3]
	}
	return &Caller{
		Kind:              adapterconfig.IssuerServiceAccount,
		Subject:           token.Subject,
		Issuer:            token.Issuer,
		ServiceAccount:    ns + "/" + name,
		ServiceAccountUID: uid,
		Groups:            []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		Claims:            claims,
	}, nil
}

func stringsOf(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// currentVerifier returns the verifier, discovering the issuer when it has none yet and
// the last attempt is long enough ago.
func (i *issuer) currentVerifier() (*oidc.IDTokenVerifier, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.verifier != nil {
		return i.verifier, nil
	}
	if time.Now().Before(i.nextTry) {
		return nil, fmt.Errorf("issuer %s is not reachable yet: %w", i.cfg.URL, i.lastError)
	}
	v, err := i.discover()
	if err != nil {
		i.backoff = min(max(2*i.backoff, firstDiscoveryRetry), maxDiscoveryRetry)
		i.nextTry, i.lastError = time.Now().Add(i.backoff), err
		return nil, fmt.Errorf("issuer %s: %w", i.cfg.URL, err)
	}
	i.verifier = v
	return v, nil
}

// discover reads the issuer's discovery document. Its keys are fetched with the same
// client, again on an unknown key id but at most once per cooldown.
func (i *issuer) discover() (*oidc.IDTokenVerifier, error) {
	client, err := discoveryClient(i.cfg.CAFile)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), i.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return nil, errors.New("discovery: the document names no jwks_uri")
	}
	i.keySet = newCooledKeySet(client, doc.JWKSURI)
	return oidc.NewVerifier(i.cfg.URL, i.keySet, &oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: signingAlgs}), nil
}

// discoveryClient trusts only the CAs of caFile when it is set, the system's otherwise.
func discoveryClient(caFile string) (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pool, err := egress.CertPoolFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("the issuer's CA bundle: %w", err)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport, Timeout: discoveryTimeout}, nil
}

// sameConfig says whether an issuer can be kept across an update (its discovered keys
// with it).
func (i *issuer) sameConfig(cfg adapterconfig.Issuer) bool {
	return reflect.DeepEqual(i.cfg, cfg)
}

// KeyVerifier checks JWTs offline against one issuer's key set: the signature (by a
// public-key algorithm), the issuer, the expiry and the audience. The catalog uses it
// to refuse a forged service-account token before it spends a TokenReview on it.
type KeyVerifier struct {
	verifier *oidc.IDTokenVerifier
}

// NewKeyVerifier checks tokens of issuerURL, signed by a key of jwks, for audience.
func NewKeyVerifier(issuerURL string, jwks json.RawMessage, audience string) (*KeyVerifier, error) {
	keys, err := publicKeys(jwks)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", issuerURL, err)
	}
	return &KeyVerifier{verifier: oidc.NewVerifier(issuerURL, &oidc.StaticKeySet{PublicKeys: keys},
		&oidc.Config{ClientID: audience, SupportedSigningAlgs: signingAlgs})}, nil
}

// Verify says why the token is not one the issuer signed for the audience, or nil.
func (k *KeyVerifier) Verify(ctx context.Context, raw string) error {
	_, err := k.verifier.Verify(ctx, raw)
	return err
}

// SignedWithPublicKey says whether a JWT's header names a public-key signing algorithm
// and it carries a signature: "none", HMAC (a shared secret, not an issuer's key) and
// empty signatures are no issuer's.
func SignedWithPublicKey(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || parts[2] == "" {
		return false
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	return json.Unmarshal(header, &h) == nil && slices.Contains(signingAlgs, h.Alg)
}

// UnverifiedIssuer reads a JWT's "iss" without checking anything, to pick the key set
// that will check it; false for anything that is not a JWT naming an issuer.
func UnverifiedIssuer(raw string) (string, bool) { return unverifiedIssuer(raw) }

// unverifiedIssuer reads a JWT's "iss" without checking anything, only to pick the
// issuer that will check it.
func unverifiedIssuer(raw string) (string, bool) {
	var claims struct {
		Iss string `json:"iss"`
	}
	if !UnverifiedClaims(raw, &claims) || claims.Iss == "" {
		return "", false
	}
	return claims.Iss, true
}

// UnverifiedClaims decodes a JWT's claims (into the value given) without checking the signature: for
// choosing who checks it, or for a token something else has already checked (the
// catalog's, by TokenReview). It is false for anything that is not a JWT.
func UnverifiedClaims(raw string, into any) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(payload, into) == nil
}
