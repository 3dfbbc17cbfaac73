package connect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// Labels and annotations of the Secrets that hold connected accounts and pending
// connects, in the operator's namespace. None names a caller: the Secret's name is a
// digest, the caller's identity is inside the encrypted data.
const (
	// LabelAccount marks a connected account ("true") or a pending connect ("pending").
	LabelAccount = "cantus.dev/connect"
	// LabelImportNamespace and LabelImport name the RemoteToolImport.
	LabelImportNamespace = "cantus.dev/connect-import-namespace"
	LabelImport          = "cantus.dev/connect-import"
	// LabelCallerUID is the UID of a service-account caller: when no service account
	// has it any more, the account is forgotten.
	LabelCallerUID = "cantus.dev/connect-caller-uid"
	// LabelCallerNamespace is the namespace of a service-account caller.
	LabelCallerNamespace = "cantus.dev/connect-caller-namespace"
	// LabelKey is the id of the key the data is encrypted with.
	LabelKey = "cantus.dev/connect-key"
	// LabelState is StateConnected or StateReconnectNeeded.
	LabelState = "cantus.dev/connect-state"
	// annotationRefreshing claims the refresh of an account until the time it holds
	// (RFC 3339): one writer refreshes, the others wait for its result.
	annotationRefreshing = "cantus.dev/connect-refreshing-until"
)

// Values of LabelAccount and LabelState.
const (
	kindAccount          = "account"
	kindPending          = "pending"
	StateConnected       = "connected"
	StateReconnectNeeded = "reconnect-needed"
)

// dataKey is the Secret key that holds the encrypted record.
const dataKey = "sealed"

// Account is a caller's connected account at an import's authorization server.
type Account struct {
	Import       string    `json:"import"`
	Caller       string    `json:"caller"`
	AccessToken  string    `json:"access"`
	RefreshToken string    `json:"refresh,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Issued is when the access token was obtained: a short-lived token is refreshed
	// at half its life rather than a minute before it ends.
	Issued    time.Time `json:"issued,omitzero"`
	Issuer    string    `json:"issuer"`
	TokenURL  string    `json:"tokenURL"`
	RevokeURL string    `json:"revokeURL,omitempty"`
	ClientID  string    `json:"clientID"`
	Scopes    []string  `json:"scopes,omitempty"`
	Resource  string    `json:"resource"`
}

// pending is a connect URL handed out and not used yet.
type pending struct {
	Import    string    `json:"import"`
	Caller    string    `json:"caller"`
	Nonce     string    `json:"nonce"`
	State     string    `json:"state,omitempty"`
	Verifier  string    `json:"verifier"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Started: the URL was opened (it works once); State is then what the callback
	// must bring back.
	Started     bool   `json:"started,omitempty"`
	RedirectURI string `json:"redirectURI,omitempty"`
	// IDNonce, for an OIDC caller, is the nonce the ID token of the sign-in must hold:
	// it binds that token to this connect.
	IDNonce string `json:"idNonce,omitempty"`
}

// Store keeps accounts and pending connects in Secrets of Namespace, read from the API
// server (never a cache: their values must not sit in the manager's memory longer than
// a request).
type Store struct {
	Client    client.Client
	Namespace string
	Keys      *Keys
}

// slot digests an (import, caller) pair: the same digest names its account and its
// pending connect.
func slot(importRef, caller string) string {
	sum := sha256.Sum256([]byte(importRef + "\x00" + caller))
	return hex.EncodeToString(sum[:16])
}

// AccountName is the Secret of caller's account for the import ("namespace/name").
func AccountName(importRef, caller string) string {
	return "cantus-connect-a-" + slot(importRef, caller)
}

func pendingName(digest string) string { return "cantus-connect-p-" + digest }

// errNoAccount: the caller has no account for the import.
var errNoAccount = errors.New("no connected account")

// errReconnect: the account exists but cannot be used (its key is gone, or its refresh
// failed): the caller must connect again.
var errReconnect = errors.New("the account must be connected again")

// load reads caller's account for the import, with the Secret it is kept in.
func (s *Store) load(ctx context.Context, importRef, caller string) (*Account, *corev1.Secret, error) {
	secret := &corev1.Secret{}
	name := AccountName(importRef, caller)
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, errNoAccount
		}
		return nil, nil, fmt.Errorf("read a connected account: %w", err)
	}
	if secret.Labels[LabelState] == StateReconnectNeeded {
		return nil, secret, errReconnect
	}
	var acct Account
	if err := s.open(ctx, secret, &acct); err != nil {
		return nil, secret, err
	}
	if acct.Import != importRef || acct.Caller != caller {
		return nil, secret, errReconnect
	}
	return &acct, secret, nil
}

// open decrypts a Secret's record; a record that cannot be opened (key gone, or not
// ours) means reconnecting, ErrNoKeys when the ring itself is missing.
func (s *Store) open(ctx context.Context, secret *corev1.Secret, into any) error {
	ring, err := s.Keys.Ring(ctx)
	if err != nil {
		return err
	}
	plain, err := ring.Open(secret.Labels[LabelKey], secret.Data[dataKey], []byte(secret.Name))
	if err != nil {
		return errReconnect
	}
	if err := json.Unmarshal(plain, into); err != nil {
		return errReconnect
	}
	return nil
}

// seal encrypts v for the Secret named name, with the newest key.
func (s *Store) seal(ctx context.Context, name string, v any) (keyID string, box []byte, err error) {
	ring, err := s.Keys.Ring(ctx)
	if err != nil {
		return "", nil, err
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("encode: %w", err)
	}
	return ring.Seal(plain, []byte(name))
}

// labelsFor are the labels of an (import, caller) slot's Secrets.
func labelsFor(kind, importRef, caller, keyID string) map[string]string {
	ns, name, _ := strings.Cut(importRef, "/")
	labels := map[string]string{LabelAccount: kind, LabelImportNamespace: ns, LabelImport: name, LabelKey: keyID,
		// The operator's admission policy lets it write only objects it labels its own.
		workload.LabelManagedBy: workload.FieldOwner}
	if ns, uid := serviceAccountOf(caller); uid != "" {
		labels[LabelCallerUID], labels[LabelCallerNamespace] = uid, ns
	}
	return labels
}

// serviceAccountOf is the namespace and UID in a service-account caller's identity
// ("serviceaccount:<namespace>/<name>#<uid>"), empty for others.
func serviceAccountOf(caller string) (namespace, uid string) {
	rest, ok := strings.CutPrefix(caller, "serviceaccount:")
	if !ok {
		return "", ""
	}
	nsName, uid, _ := strings.Cut(rest, "#")
	namespace, _, _ = strings.Cut(nsName, "/")
	return namespace, uid
}

// serviceAccountCaller splits a service-account caller's identity.
func serviceAccountCaller(caller string) (namespace, name, uid string, ok bool) {
	nsName, uid, ok := cutPair(caller, "serviceaccount:", "#")
	if !ok {
		return "", "", "", false
	}
	if namespace, name, ok = cutPair(nsName, "", "/"); !ok {
		return "", "", "", false
	}
	return namespace, name, uid, true
}

// cutPair splits what follows prefix in s at the first sep, into two parts that must
// both be non-empty: the shape of every identity string connect mode reads.
func cutPair(s, prefix, sep string) (before, after string, ok bool) {
	rest, found := strings.CutPrefix(s, prefix)
	if !found {
		return "", "", false
	}
	before, after, found = strings.Cut(rest, sep)
	return before, after, found && before != "" && after != ""
}

// sealedSecret is the Secret named name that holds v encrypted with the newest key:
// previous (as read, so that its resourceVersion guards the update) or a new one,
// labelled as kind for import and caller.
func (s *Store) sealedSecret(ctx context.Context, name string, v any, previous *corev1.Secret, kind, importRef, caller string) (*corev1.Secret, error) {
	keyID, box, err := s.seal(ctx, name, v)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}}
	if previous != nil {
		secret = previous.DeepCopy()
	}
	secret.Labels = labelsFor(kind, importRef, caller, keyID)
	secret.Type = corev1.SecretTypeOpaque
	secret.Data = map[string][]byte{dataKey: box}
	return secret, nil
}

// save writes caller's account: created, or replacing the Secret last read (update
// with its resourceVersion, so that a concurrent writer's change is never lost).
func (s *Store) save(ctx context.Context, acct *Account, previous *corev1.Secret) error {
	secret, err := s.sealedSecret(ctx, AccountName(acct.Import, acct.Caller), acct, previous, kindAccount, acct.Import, acct.Caller)
	if err != nil {
		return err
	}
	secret.Labels[LabelState] = StateConnected
	delete(secret.Annotations, annotationRefreshing)
	if previous == nil {
		err := s.Client.Create(ctx, secret)
		if apierrors.IsAlreadyExists(err) {
			// Connected again over an older account: replace it.
			old := &corev1.Secret{}
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(secret), old); err != nil {
				return fmt.Errorf("read the connected account to replace: %w", err)
			}
			return s.save(ctx, acct, old)
		}
		if err != nil {
			return fmt.Errorf("store the connected account: %w", err)
		}
		return nil
	}
	if err := s.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("store the connected account: %w", err)
	}
	return nil
}

// markReconnect keeps the account's Secret but marks it unusable, dropping its tokens:
// the caller must connect again, and the status counts it.
func (s *Store) markReconnect(ctx context.Context, secret *corev1.Secret) error {
	updated := secret.DeepCopy()
	updated.Labels[LabelState] = StateReconnectNeeded
	delete(updated.Annotations, annotationRefreshing)
	updated.Data = nil
	if err := s.Client.Update(ctx, updated); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("mark an account for reconnecting: %w", err)
	}
	return nil
}

// forget deletes a Secret of the store, as it was read (a newer version is left alone).
func (s *Store) forget(ctx context.Context, secret *corev1.Secret) error {
	err := s.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID, ResourceVersion: &secret.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("forget a connected account: %w", err)
	}
	return nil
}

func hexDecode(s string) ([]byte, error) { return hex.DecodeString(s) }
