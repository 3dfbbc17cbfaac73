package saissuer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// The keys come from a real API server: envtest's kube-apiserver signs service-account
// tokens and serves its discovery document and key set.
func TestFetchReadsTheAPIServersIssuerAndKeys(t *testing.T) {
	cfg := testenv.StartForTest(t)
	client := discovery.NewDiscoveryClientForConfigOrDie(cfg).RESTClient()

	keys, err := Fetch(context.Background(), client)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if !strings.HasPrefix(keys.URL, "https://") {
		t.Errorf("issuer %q, want the API server's https issuer", keys.URL)
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(keys.JWKS, &set); err != nil || len(set.Keys) == 0 || set.Keys[0].Kid == "" {
		t.Fatalf("JWKS %s: want at least one key with a kid (err %v)", keys.JWKS, err)
	}
}

// A rotated key set is noticed by the next refresh, and OnChange is called once for it;
// an unchanged one calls nothing.
func TestWatcherNoticesRotatedKeys(t *testing.T) {
	var jwks atomic.Value
	jwks.Store(`{"keys":[{"kty":"RSA","kid":"one","n":"AQAB","e":"AQAB"}]}`)
	var jwksFetches atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case discoveryPath:
			_, _ = w.Write([]byte(`{"issuer":"https://kubernetes.default.svc","jwks_uri":"https://x/openid/v1/jwks"}`))
		case jwksPath:
			jwksFetches.Add(1)
			_, _ = w.Write([]byte(jwks.Load().(string)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(api.Close)
	client := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: api.URL}).RESTClient()
	changes := make(chan struct{}, 4)
	w := &Watcher{Client: client, Every: 20 * time.Millisecond, OnChange: func() { changes <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	first, err := w.Current(ctx)
	if err != nil || !strings.Contains(string(first.JWKS), `"one"`) {
		t.Fatalf("Current: %s, %v", first.JWKS, err)
	}
	go func() { _ = w.Start(ctx) }()
	// The watcher compares each fetch with the last before it fetches again: once it has
	// begun a third fetch after Current's, two unchanged fetches were compared.
	fetched := jwksFetches.Load()
	testkit.EventuallyTrue(t, 10*time.Second, "the watcher to fetch the unchanged keys three times", func() bool { return jwksFetches.Load() >= fetched+3 })
	select {
	case <-changes:
		t.Fatal("OnChange called although the keys did not change")
	default:
	}

	jwks.Store(`{"keys":[{"kty":"RSA","kid":"two","n":"AQAB","e":"AQAB"}]}`)
	testkit.Receive(t, 10*time.Second, "OnChange after the keys rotated", changes)
	now, err := w.Current(ctx)
	if err != nil || !strings.Contains(string(now.JWKS), `"two"`) {
		t.Fatalf("Current after rotation: %s, %v", now.JWKS, err)
	}
}
