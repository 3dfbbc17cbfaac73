package connect

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keySize is the size of a key of the ring: AES-256.
const keySize = 32

// ErrNoKeys says the key Secret is missing or holds no usable key. Nothing new can be
// stored, and no stored account can be read: every connected account needs reconnecting.
var ErrNoKeys = errors.New("the connect key Secret is missing or holds no 32-byte key")

// errUnknownKey: the key an account was sealed with is no longer in the ring.
var errUnknownKey = errors.New("the key this account was encrypted with is not in the key ring")

// KeyRing holds the keys that encrypt connected accounts at rest (AES-256-GCM), by key
// id. New data is sealed with the newest key, the last id in byte order (name keys so
// that they sort by age, e.g. 2026-12-01); data sealed with any key of the ring opens.
type KeyRing struct {
	keys   map[string]cipher.AEAD
	newest string
}

// NewKeyRing builds a ring from a key Secret's data: each key is 32 bytes, raw or in
// standard base64 (`head -c32 /dev/urandom | base64`). Keys of another size are
// skipped, so a typo cannot take every account down: ErrNoKeys only when none is left.
func NewKeyRing(data map[string][]byte) (*KeyRing, error) {
	ring := &KeyRing{keys: map[string]cipher.AEAD{}}
	ids := make([]string, 0, len(data))
	for id, raw := range data {
		key := decodeKey(raw)
		if key == nil {
			continue
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", id, err)
		}
		ring.keys[id] = aead
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, ErrNoKeys
	}
	slices.Sort(ids)
	ring.newest = ids[len(ids)-1]
	return ring, nil
}

func decodeKey(raw []byte) []byte {
	if len(raw) == keySize {
		return raw
	}
	decoded, err := base64.StdEncoding.DecodeString(string(raw))
	if err == nil && len(decoded) == keySize {
		return decoded
	}
	return nil
}

// Newest is the id of the key new data is sealed with.
func (k *KeyRing) Newest() string { return k.newest }

// Has says whether the ring holds key id.
func (k *KeyRing) Has(id string) bool { _, ok := k.keys[id]; return ok }

// Seal encrypts plaintext with the newest key; aad binds the box to where it is kept
// (the Secret's name), so that a box copied into another account's Secret does not open.
func (k *KeyRing) Seal(plaintext, aad []byte) (keyID string, box []byte, err error) {
	aead := k.keys[k.newest]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("nonce: %w", err)
	}
	return k.newest, aead.Seal(nonce, nonce, plaintext, aad), nil
}

// Open decrypts a box sealed with key id.
func (k *KeyRing) Open(keyID string, box, aad []byte) ([]byte, error) {
	aead, ok := k.keys[keyID]
	if !ok {
		return nil, errUnknownKey
	}
	if len(box) < aead.NonceSize() {
		return nil, errors.New("the encrypted account is truncated")
	}
	plain, err := aead.Open(nil, box[:aead.NonceSize()], box[aead.NonceSize():], aad)
	if err != nil {
		return nil, fmt.Errorf("decrypt with key %s: %w", keyID, err)
	}
	return plain, nil
}

// Keys reads the key ring from its Secret, again at most every refresh, so that an
// added key is used and a removed one forgotten without a restart.
type Keys struct {
	Reader  client.Reader
	Secret  types.NamespacedName
	Refresh time.Duration

	mu     sync.Mutex
	ring   *KeyRing
	err    error
	readAt time.Time
}

// defaultKeysRefresh is how soon a changed key Secret is read again; a missing or
// unreadable one is read again after missingKeysRefresh, so that a Secret created just
// after a read is used at once rather than refused for the whole refresh.
const (
	defaultKeysRefresh = 30 * time.Second
	missingKeysRefresh = time.Second
)

// Ring is the current key ring, or ErrNoKeys.
func (k *Keys) Ring(ctx context.Context) (*KeyRing, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	refresh := k.Refresh
	if refresh == 0 {
		refresh = defaultKeysRefresh
	}
	if k.err != nil {
		refresh = min(refresh, missingKeysRefresh)
	}
	if !k.readAt.IsZero() && time.Since(k.readAt) < refresh {
		return k.ring, k.err
	}
	k.ring, k.err = k.read(ctx)
	k.readAt = time.Now()
	return k.ring, k.err
}

// Forget makes the next Ring read the Secret again.
func (k *Keys) Forget() {
	k.mu.Lock()
	k.readAt = time.Time{}
	k.mu.Unlock()
}

func (k *Keys) read(ctx context.Context) (*KeyRing, error) {
	if k.Secret.Name == "" {
		return nil, ErrNoKeys
	}
	s := &corev1.Secret{}
	if err := k.Reader.Get(ctx, k.Secret, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ErrNoKeys
		}
		return nil, fmt.Errorf("read the connect key Secret: %w", err)
	}
	return NewKeyRing(s.Data)
}
