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

	"github.com/go-logr/logr"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
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
// The keys are shared by the replicas when the config names a key file
// (RequestStateKeyFile, which the operator fills from a Secret of the gateway's own);
// otherwise each process makes its own, and a retry must reach the replica that gave
// the state (one replica, or affinity). The file holds one key per line: the first
// seals, every one opens, so that while a key is rotated the previous one still opens
// the states it sealed (for their expiry, after which the operator drops it). The file
// is read again when it changes, as the kubelet replaces a mounted Secret's files.

// Bounds of sealed request states.
const (
	requestStatePrefix = "cantus-mrtr."
	// requestStateTTL is how long a caller has to answer what a remote asked.
	requestStateTTL = adapterconfig.RequestStateTTL
	// maxUsedRequestStates bounds the states a replica remembers as used.
	maxUsedRequestStates = 1 << 16
	// MinRequestStateKeyBytes is the shortest key a key file may hold.
	MinRequestStateKeyBytes = 32
	// MaxRequestStateKeys bounds the keys a key file may hold (the current one and
	// those still opening states sealed before a rotation).
	MaxRequestStateKeys = 4
	// maxRemoteStateBytes bounds the remote's state a sealed state carries.
	maxRemoteStateBytes = 16 << 10
)

// MarkerInputRefused begins the error result of a retry whose requestState the gateway
// refuses.
const MarkerInputRefused = "mcp_request_state_refused: "

// stateSealer seals and opens the gateway's request states.
type stateSealer struct {
	mu sync.RWMutex
	// keys[0] seals; every key opens.
	keys [][]byte
	// file, when set, is where keys were read from; stamp is what it looked like then.
	file  string
	stamp fileStamp
	used  *lru.Cache[string, struct{}]
	now   func() time.Time
	log   logr.Logger
}

func newStateSealer() *stateSealer {
	used, _ := lru.New[string, struct{}](maxUsedRequestStates) // errors only for a size <= 0
	return &stateSealer{keys: [][]byte{randomKey()}, used: used, now: time.Now, log: logr.Discard()}
}

func randomKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}

// ReadRequestStateKeys reads the keys of sealed request states from path: one per
// line without surrounding whitespace, blank lines skipped, each at least
// MinRequestStateKeyBytes long, at most MaxRequestStateKeys of them. The first seals.
func ReadRequestStateKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the request state key file: %w", err)
	}
	var keys [][]byte
	for line := range bytes.Lines(data) {
		key := bytes.TrimSpace(line)
		if len(key) == 0 {
			continue
		}
		if len(key) < MinRequestStateKeyBytes {
			return nil, fmt.Errorf("the request state key file %s holds a key of %d bytes, fewer than the %d a key needs", path, len(key), MinRequestStateKeyBytes)
		}
		keys = append(keys, key)
	}
	switch {
	case len(keys) == 0:
		return nil, fmt.Errorf("the request state key file %s holds no key", path)
	case len(keys) > MaxRequestStateKeys:
		return nil, fmt.Errorf("the request state key file %s holds %d keys, more than the %d a gateway takes", path, len(keys), MaxRequestStateKeys)
	}
	return keys, nil
}

// UseRequestStateKeyFile makes the pool seal request states with the keys of path,
// which every replica of the gateway reads, and read them again when the file
// changes; "" keeps (or goes back to) a key of the process's own. A file that cannot
// be read, or holds no good key, is an error and changes nothing.
func (p *Pool) UseRequestStateKeyFile(path string) error {
	s := p.relay.states
	s.mu.Lock()
	defer s.mu.Unlock()
	if path == "" {
		if s.file != "" {
			s.keys, s.file, s.stamp = [][]byte{randomKey()}, "", fileStamp{}
		}
		return nil
	}
	stamp := statFile(path)
	keys, err := ReadRequestStateKeys(path)
	if err != nil {
		return err
	}
	s.keys, s.file, s.stamp = keys, path, stamp
	return nil
}

// currentKeys are the keys to seal and open with, read again when the key file
// changed. A file that no longer reads keeps the keys read last: the kubelet swaps a
// Secret's files at once, so a failure is passing, and refusing every state is worse.
func (s *stateSealer) currentKeys() [][]byte {
	s.mu.RLock()
	keys, file, stamp := s.keys, s.file, s.stamp
	s.mu.RUnlock()
	if file == "" {
		return keys
	}
	now := statFile(file)
	if now == stamp {
		return keys
	}
	read, err := ReadRequestStateKeys(file)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != file {
		return s.keys
	}
	s.stamp = now
	if err != nil {
		s.log.Error(err, "the request state key file changed and could not be read; the keys read before stay in use")
		return s.keys
	}
	s.keys = read
	s.log.Info("request state keys read again", "keys", len(read))
	return read
}

// statFile stamps the file at path; os.Stat follows the symlinks of a Secret volume.
func statFile(path string) fileStamp {
	stamp := fileStamp{path: path, size: -1}
	if fi, err := os.Stat(path); err == nil {
		stamp.size, stamp.modTime, stamp.inode = fi.Size(), fi.ModTime().UnixNano(), fileIdentity(fi)
	}
	return stamp
}

// sealedToken is what a request state or a task handle holds, before its MAC: what the
// remote gave, and whose requests about which tool (or prompt) of which import may use
// it until when.
type sealedToken struct {
	Remote  string `json:"r"` // the remote's requestState or taskId
	Caller  string `json:"c"` // a digest of the caller's name
	Tool    string `json:"t"` // stateSubject.sealedName
	Import  string `json:"i"`
	Expires int64  `json:"e"` // Unix seconds
	Nonce   string `json:"n,omitempty"`
}

// tokenKind is one kind of sealed token: how it is spelled and MAC'd, and the errors
// that refuse one.
type tokenKind struct {
	prefix string
	// domain keeps the kinds apart under one key: a token of one kind never opens as
	// another.
	domain                           string
	forged, expired, caller, subject error
}

// stateSubject is what a sealed token is given for: a tool, or an imported prompt,
// of one import.
type stateSubject interface {
	// sealedName names the subject among the import's: a tool's name, or "prompt:"
	// and the prompt's (a tool's name holds no ":").
	sealedName() string
	importName() string
}

func (t *Tool) sealedName() string { return t.Name }
func (t *Tool) importName() string { return t.Backend.Import }

// sealToken seals v for caller's requests about t under the current key.
func (s *stateSealer) sealToken(kind tokenKind, v sealedToken, caller string, t stateSubject) (string, error) {
	key := s.currentKeys()[0]
	v.Caller, v.Tool, v.Import = callerDigest(key, caller), t.sealedName(), t.importName()
	payload, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	return kind.prefix + body + "." + mac(key, kind.domain+body), nil
}

// openToken checks token for caller's request about t and returns what it holds; the
// error is one of kind's.
func (s *stateSealer) openToken(kind tokenKind, token, caller string, t stateSubject) (sealedToken, error) {
	var sealed sealedToken
	body, tag, ok := strings.Cut(strings.TrimPrefix(token, kind.prefix), ".")
	if !ok || !strings.HasPrefix(token, kind.prefix) {
		return sealed, kind.forged
	}
	key := keyThatSealed(s.currentKeys(), kind.domain+body, tag)
	if key == nil {
		return sealed, kind.forged
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(payload, &sealed) != nil {
		return sealed, kind.forged
	}
	switch {
	case s.now().Unix() > sealed.Expires:
		return sealed, kind.expired
	case !hmac.Equal([]byte(sealed.Caller), []byte(callerDigest(key, caller))):
		return sealed, kind.caller
	case sealed.Tool != t.sealedName() || sealed.Import != t.importName():
		return sealed, kind.subject
	}
	return sealed, nil
}

// peekToken reads token without checking it.
func peekToken(kind tokenKind, token string) (sealedToken, bool) {
	var sealed sealedToken
	body, _, ok := strings.Cut(strings.TrimPrefix(token, kind.prefix), ".")
	if !ok {
		return sealed, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	return sealed, err == nil && json.Unmarshal(payload, &sealed) == nil
}

func mac(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(requestStatePrefix + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Why a request state is refused; each is the text of the error result.
var (
	errStateForged   = errors.New("the requestState is not one this gateway gave (altered, or sealed with another key: without a shared key, a retry must reach the replica that asked)")
	errStateExpired  = errors.New("the requestState has expired: call the tool again")
	errStateCaller   = errors.New("the requestState was given to another caller")
	errStateTool     = errors.New("the requestState was given for another tool or prompt")
	errStateReplayed = errors.New("the requestState was used already: a state answers one retry; call the tool again")
)

// requestStates are the tokens that wrap a remote's requestState.
var requestStates = tokenKind{prefix: requestStatePrefix, forged: errStateForged, expired: errStateExpired, caller: errStateCaller, subject: errStateTool}

// seal wraps the remote's state for caller's retry of the request about t.
func (s *stateSealer) seal(remoteState, caller string, t stateSubject) (string, error) {
	if len(remoteState) > maxRemoteStateBytes {
		return "", fmt.Errorf("the remote's requestState holds %d bytes, more than the %d a gateway passes on", len(remoteState), maxRemoteStateBytes)
	}
	return s.sealToken(requestStates, sealedToken{Remote: remoteState, Expires: s.now().Add(requestStateTTL).Unix(),
		Nonce: randomToken(12)}, caller, t)
}

// open checks state for caller's retry of the request about t and returns the
// remote's state in it. A state opened once is used: another retry with it is refused.
func (s *stateSealer) open(state, caller string, t stateSubject) (string, error) {
	sealed, err := s.openToken(requestStates, state, caller, t)
	if err != nil {
		return "", err
	}
	if seen, _ := s.used.ContainsOrAdd(sealed.Nonce, struct{}{}); seen {
		return "", errStateReplayed
	}
	return sealed.Remote, nil
}

// keyThatSealed is the key among keys whose MAC of body is tag; nil when none is.
func keyThatSealed(keys [][]byte, body, tag string) []byte {
	for _, key := range keys {
		if hmac.Equal([]byte(tag), []byte(mac(key, body))) {
			return key
		}
	}
	return nil
}

// callerDigest stands for the caller in a state, which the caller can read: keyed, so
// that neither its name nor a guess at it can be read from the state.
func callerDigest(key []byte, caller string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("caller\x00" + caller))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}
