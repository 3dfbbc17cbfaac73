package connect

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"golang.org/x/oauth2"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// connectURLLifetime is how long a connect URL works (once).
const connectURLLifetime = 10 * time.Minute

// reuseURLFor: a connect URL with at least this long left is handed out again rather
// than replaced, so that a caller retrying gets the URL its user may be opening.
const reuseURLFor = 2 * time.Minute

// annotationExpires is when a pending connect expires (RFC 3339), so that expired ones
// are swept without decrypting them.
const annotationExpires = "cantus.dev/connect-expires"

// Errors of the start and callback pages, for people.
var (
	errLinkUnknown = errors.New("this connect link is unknown or was replaced by a newer one; ask your agent to try again, and open the link it gives")
	errLinkUsed    = errors.New("this connect link was used already; ask your agent to try again, and open the new link it gives")
	errLinkExpired = errors.New("this connect link has expired; ask your agent to try again, and open the new link it gives")
)

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// connectURL is where caller's user connects the account for the import: the URL
// handed out before while it has long enough left, otherwise a new one (the old one
// then stops working). It holds the slot's digest and a random nonce, and nothing of
// the caller.
func (s *Store) connectURL(ctx context.Context, base, importRef, caller string, now time.Time) (string, time.Duration, error) {
	digest := slot(importRef, caller)
	name := pendingName(digest)
	previous := &corev1.Secret{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, previous)
	switch {
	case apierrors.IsNotFound(err):
		previous = nil
	case err != nil:
		return "", 0, fmt.Errorf("read a pending connect: %w", err)
	default:
		var p pending
		if err := s.open(ctx, previous, &p); err == nil && !p.Started && p.Import == importRef && p.Caller == caller && p.ExpiresAt.Sub(now) >= reuseURLFor {
			return startURL(base, digest, p.Nonce), p.ExpiresAt.Sub(now), nil
		} else if errors.Is(err, ErrNoKeys) {
			return "", 0, err
		}
	}
	p := pending{Import: importRef, Caller: caller, Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), ExpiresAt: now.Add(connectURLLifetime)}
	if err := s.savePending(ctx, name, &p, previous); err != nil {
		return "", 0, err
	}
	return startURL(base, digest, p.Nonce), connectURLLifetime, nil
}

func startURL(base, digest, nonce string) string {
	return strings.TrimSuffix(base, "/") + adapterconfig.ConnectStartPath + "?s=" + url.QueryEscape(digest+"."+nonce)
}

// savePending creates a pending connect, or replaces previous (as read: a concurrent
// change makes this fail rather than be overwritten).
func (s *Store) savePending(ctx context.Context, name string, p *pending, previous *corev1.Secret) error {
	secret, err := s.sealedSecret(ctx, name, p, previous, kindPending, p.Import, p.Caller)
	if err != nil {
		return err
	}
	secret.Annotations = map[string]string{annotationExpires: p.ExpiresAt.UTC().Format(time.RFC3339)}
	if previous == nil {
		err = s.Client.Create(ctx, secret)
	} else {
		err = s.Client.Update(ctx, secret)
	}
	if err != nil {
		return fmt.Errorf("store a pending connect: %w", err)
	}
	return nil
}

// readPending finds the pending connect a start link or callback state names
// ("<digest>.<secret>"), and checks the secret part with want (the nonce or the state).
func (s *Store) readPending(ctx context.Context, value string, want func(*pending) string) (*pending, *corev1.Secret, error) {
	digest, secretPart, ok := strings.Cut(value, ".")
	if !ok || len(digest) != 32 || secretPart == "" {
		return nil, nil, errLinkUnknown
	}
	if _, err := hexDecode(digest); err != nil {
		return nil, nil, errLinkUnknown
	}
	secret := &corev1.Secret{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: pendingName(digest)}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, errLinkUnknown
		}
		return nil, nil, fmt.Errorf("read a pending connect: %w", err)
	}
	var p pending
	if err := s.open(ctx, secret, &p); err != nil {
		if errors.Is(err, ErrNoKeys) {
			return nil, nil, err
		}
		return nil, nil, errLinkUnknown
	}
	if subtle.ConstantTimeCompare([]byte(want(&p)), []byte(secretPart)) != 1 {
		return nil, nil, errLinkUnknown
	}
	return &p, secret, nil
}
