// Package saissuer follows the cluster's service-account token issuer: its identifier and
// signing keys, read from the API server's OIDC discovery endpoints, and the deletions of
// service accounts and pods that revoke the tokens bound to them. Adapter pods check
// service-account tokens offline against these, so they need no API access; the
// operator reads them and hands them over, and notices when they change.
package saissuer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cantus-dev/cantus-operator/internal/periodic"
)

// The operator reads the issuer's discovery endpoints itself, even where the cluster's
// default binding of them to every service account was removed.
// +kubebuilder:rbac:urls=/.well-known/openid-configuration;/openid/v1/jwks,verbs=get

// The API server's discovery endpoints (KEP-1393).
const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/openid/v1/jwks"
)

// maxDocumentBytes bounds what is read from either endpoint; a JWKS of a few keys is a
// few KiB.
const maxDocumentBytes = 1 << 20

// Keys are the issuer identifier and its JSON Web Key Set.
type Keys struct {
	URL  string
	JWKS json.RawMessage
}

func (k Keys) equal(o Keys) bool { return k.URL == o.URL && bytes.Equal(k.JWKS, o.JWKS) }

// Watcher reads the issuer's keys on first need and refreshes them while started.
type Watcher struct {
	// Client reaches the API server's non-resource paths (a discovery client's RESTClient).
	Client rest.Interface
	// Every is how often Start refreshes the keys.
	Every time.Duration
	// OnChange is called after a refresh found other keys than before.
	OnChange func()

	mu      sync.Mutex
	current *Keys
}

// Current returns the keys, reading them when none were read yet.
func (w *Watcher) Current(ctx context.Context) (Keys, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil {
		return *w.current, nil
	}
	keys, err := Fetch(ctx, w.Client)
	if err != nil {
		return Keys{}, err
	}
	w.current = &keys
	return keys, nil
}

// Start refreshes the keys every Every until ctx ends (a manager.Runnable). A failed
// refresh keeps the last keys: tokens signed by them stay valid until they expire.
func (w *Watcher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("service-account-issuer")
	periodic.Run(ctx, w.Every, func() {
		changed, err := w.refresh(ctx)
		if err != nil {
			log.Error(err, "refresh the service-account issuer keys; keeping the last ones")
			return
		}
		if changed {
			log.Info("the service-account issuer keys changed; updating the servers that accept service-account tokens")
			if w.OnChange != nil {
				w.OnChange()
			}
		}
	})
	return nil
}

func (w *Watcher) refresh(ctx context.Context) (bool, error) {
	keys, err := Fetch(ctx, w.Client)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := w.current != nil && !w.current.equal(keys)
	w.current = &keys
	return changed, nil
}

// Fetch reads the issuer identifier from the discovery document and its key set.
func Fetch(ctx context.Context, client rest.Interface) (Keys, error) {
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	doc, err := get(ctx, client, discoveryPath)
	if err != nil {
		return Keys{}, err
	}
	if err := json.Unmarshal(doc, &discovery); err != nil || discovery.Issuer == "" {
		return Keys{}, fmt.Errorf("the API server's %s names no issuer (is --service-account-issuer set?)", discoveryPath)
	}
	jwks, err := get(ctx, client, jwksPath)
	if err != nil {
		return Keys{}, err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) == 0 {
		return Keys{}, fmt.Errorf("the API server's %s holds no keys", jwksPath)
	}
	compact := &bytes.Buffer{}
	if err := json.Compact(compact, jwks); err != nil {
		return Keys{}, fmt.Errorf("compact the issuer's key set: %w", err)
	}
	return Keys{URL: discovery.Issuer, JWKS: compact.Bytes()}, nil
}

func get(ctx context.Context, client rest.Interface, path string) ([]byte, error) {
	body, err := client.Get().AbsPath(path).Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("read %s from the API server (the service-account issuer's keys): %w", path, err)
	}
	if len(body) > maxDocumentBytes {
		return nil, fmt.Errorf("the API server's %s is larger than %d bytes", path, maxDocumentBytes)
	}
	return body, nil
}
