package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// When a remote answers a forwarded call with an input-required result (protocol
// 2026-07-28, SEP-2322), the caller gets the remote's input requests and a
// requestState of the gateway's own that seals the remote's state together with the
// caller it was given to, the tool and import, and an expiry, under an HMAC-SHA256.
// The caller's retry brings it back; the gateway opens it, refuses it when it was
// tampered with, has expired, or was given to another caller or for another tool, and
// forwards the retry to the remote with the remote's own state. A state is good for
// one retry: a replica remembers the states used (a bounded LRU), so a replay is
// refused there; across replicas the expiry bounds a replay.
//
// The key is shared by the replicas when the config names a key file
// (RequestStateKeyFile); otherwise each process makes its own, and a retry must reach
// the replica that gave the state (one replica, or affinity).

// Bounds of sealed request states.
const (
	requestStatePrefix = "cantus-mrtr."
	// requestStateTTL is how long a caller has to answer what a remote asked.
	requestStateTTL = 10 * time.Minute
	// maxUsedRequestStates bounds the states a replica remembers as used.
	maxUsedRequestStates = 1 << 16
	// MinRequestStateKeyBytes is the shortest key a key file may hold.
	MinRequestStateKeyBytes = 32
	// maxRemoteStateBytes bounds the remote's state a sealed state carries.
	maxRemoteStateBytes = 16 << 10
)

// MarkerInputRefused begins the error result of a retry whose requestState the gateway
// refuses.
const MarkerInputRefused = "mcp_request_state_refused: "

// stateSealer seals and opens the gateway's request states.
type stateSealer struct {
	mu     sync.RWMutex
	key    []byte
	shared bool // the key came from a file that every replica reads
	used   *lru.Cache[string, struct{}]
	now    func() time.Time
}

func newStateSealer() *stateSealer {
	used, _ := lru.New[string, struct{}](maxUsedRequestStates) // errors only for a size <= 0
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &stateSealer{key: key, used: used, now: time.Now}
}

// ReadRequestStateKey reads the key of sealed request states from path: its content
// without surrounding whitespace, at least MinRequestStateKeyBytes long.
func ReadRequestStateKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the request state key file: %w", err)
	}
	key := bytes.TrimSpace(data)
	if len(key) < MinRequestStateKeyBytes {
		return nil, fmt.Errorf("the request state key file %s holds %d bytes, fewer than the %d a key needs", path, len(key), MinRequestStateKeyBytes)
	}
	return key, nil
}

// UseRequestStateKey makes the pool seal request states with key, which every
// replica of the gateway shares; nil keeps (or goes back to) the process's own.
func (p *Pool) UseRequestStateKey(key []byte) {
	s := p.relay.states
	s.mu.Lock()
	defer s.mu.Unlock()
	if key == nil {
		if s.shared {
			s.key, s.shared = make([]byte, 32), false
			_, _ = rand.Read(s.key)
		}
		return
	}
	s.key, s.shared = bytes.Clone(key), true
}

// sealedState is what a request state holds, before its MAC.
type sealedState struct {
	Remote  string `json:"r,omitempty"` // the remote's requestState
	Caller  string `json:"c"`           // a digest of the caller's name
	Tool    string `json:"t"`
	Import  string `json:"i"`
	Expires int64  `json:"e"` // Unix seconds
	Nonce   string `json:"n"`
}

// seal wraps the remote's state for caller's retry of tool.
func (s *stateSealer) seal(remoteState, caller string, t *Tool) (string, error) {
	if len(remoteState) > maxRemoteStateBytes {
		return "", fmt.Errorf("the remote's requestState holds %d bytes, more than the %d a gateway passes on", len(remoteState), maxRemoteStateBytes)
	}
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	payload, err := json.Marshal(sealedState{Remote: remoteState, Caller: s.callerDigest(caller), Tool: t.Name, Import: t.Backend.Import,
		Expires: s.now().Add(requestStateTTL).Unix(), Nonce: base64.RawURLEncoding.EncodeToString(nonce[:])})
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	return requestStatePrefix + body + "." + s.mac(body), nil
}

func (s *stateSealer) mac(body string) string {
	s.mu.RLock()
	m := hmac.New(sha256.New, s.key)
	s.mu.RUnlock()
	m.Write([]byte(requestStatePrefix + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Why a request state is refused; each is the text of the error result.
var (
	errStateForged   = errors.New("the requestState is not one this gateway gave (altered, or sealed with another key: without a shared key, a retry must reach the replica that asked)")
	errStateExpired  = errors.New("the requestState has expired: call the tool again")
	errStateCaller   = errors.New("the requestState was given to another caller")
	errStateTool     = errors.New("the requestState was given for another tool")
	errStateReplayed = errors.New("the requestState was used already: a state answers one retry; call the tool again")
)

// open checks state for caller's retry of t and returns the remote's state in it. A
// state opened once is used: another retry with it is refused.
func (s *stateSealer) open(state, caller string, t *Tool) (string, error) {
	body, mac, ok := strings.Cut(strings.TrimPrefix(state, requestStatePrefix), ".")
	if !ok || !strings.HasPrefix(state, requestStatePrefix) || !hmac.Equal([]byte(mac), []byte(s.mac(body))) {
		return "", errStateForged
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	var sealed sealedState
	if err != nil || json.Unmarshal(payload, &sealed) != nil {
		return "", errStateForged
	}
	switch {
	case s.now().Unix() > sealed.Expires:
		return "", errStateExpired
	case !hmac.Equal([]byte(sealed.Caller), []byte(s.callerDigest(caller))):
		return "", errStateCaller
	case sealed.Tool != t.Name || sealed.Import != t.Backend.Import:
		return "", errStateTool
	}
	if seen, _ := s.used.ContainsOrAdd(sealed.Nonce, struct{}{}); seen {
		return "", errStateReplayed
	}
	return sealed.Remote, nil
}

// callerDigest stands for the caller in a state, which the caller can read: keyed, so
// that neither its name nor a guess at it can be read from the state.
func (s *stateSealer) callerDigest(caller string) string {
	s.mu.RLock()
	m := hmac.New(sha256.New, s.key)
	s.mu.RUnlock()
	m.Write([]byte("caller\x00" + caller))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}
