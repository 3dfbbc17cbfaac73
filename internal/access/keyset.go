package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keyRefreshCooldown is how long an OIDC issuer's keys are kept before a token with an
// unknown key id may make the adapter fetch them again.
const keyRefreshCooldown = 30 * time.Second

// maxKeySetBytes bounds an issuer's JWKS answer.
const maxKeySetBytes = 1 << 20

// cooledKeySet is an OIDC issuer's key set, fetched from its jwks_uri. A token whose key
// id is not among the keys makes it fetch them again, but at most once per cooldown: a
// caller sending tokens with made-up key ids must not make the adapter fetch the issuer's
// keys on every request (go-oidc's RemoteKeySet fetches on every unknown key id). A key
// the issuer rotates in is accepted within the cooldown.
type cooledKeySet struct {
	client   *http.Client
	url      string
	cooldown time.Duration

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time
}

func newCooledKeySet(client *http.Client, url string) *cooledKeySet {
	return &cooledKeySet{client: client, url: url, cooldown: keyRefreshCooldown}
}

// VerifySignature implements oidc.KeySet.
func (s *cooledKeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, joseAlgorithms())
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := s.keysFor(ctx, kid)
	for _, k := range keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if payload, verr := jws.Verify(&k); verr == nil {
			return payload, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no key of the issuer verifies the token's signature (key id %q)", kid)
}

// keysFor returns the keys, fetched again first when none has the key id and the last
// fetch is older than the cooldown.
func (s *cooledKeySet) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.has(kid) || (!s.fetched.IsZero() && time.Since(s.fetched) < s.cooldown) {
		return s.keys, nil
	}
	s.fetched = time.Now()
	keys, err := s.fetch(ctx)
	if err != nil {
		return s.keys, fmt.Errorf("fetch the issuer's keys: %w", err)
	}
	s.keys = keys
	return keys, nil
}

func (s *cooledKeySet) has(kid string) bool {
	for _, k := range s.keys {
		if kid != "" && k.KeyID == kid {
			return true
		}
	}
	return false
}

func (s *cooledKeySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", s.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("%s answered more than %d bytes", s.url, maxKeySetBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s is not a JWKS: %w", s.url, err)
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Valid() && k.IsPublic() {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the key set holds no public keys")
	}
	return keys, nil
}

func joseAlgorithms() []jose.SignatureAlgorithm {
	algs := make([]jose.SignatureAlgorithm, len(signingAlgs))
	for i, a := range signingAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return algs
}
