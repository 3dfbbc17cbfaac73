package stdioproxy

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strings"
)

// TokenEnv is the variable the bridge reads its token from. The operator sets it from
// the bridge's Secret (kubernetes runtime) or in the bridge process's environment (local
// runtime); the bridge removes it from the environment the stdio command inherits.
const TokenEnv = "CANTUS_BRIDGE_TOKEN"

// HeaderSessionID carries the session id the bridge gives a client at initialize.
const HeaderSessionID = "Mcp-Session-Id"

// minTokenLen refuses tokens short enough to guess; the operator's are 43 characters.
const minTokenLen = 32

// TakeTokenFromEnv reads the bridge's token from TokenEnv and removes the variable from
// this process's environment, so that the stdio command started after it does not
// inherit the token. set is false when the variable is absent. A token that is present
// but empty or short is an error: it must never mean "no authentication".
func TakeTokenFromEnv() (token string, set bool, err error) {
	token, set = os.LookupEnv(TokenEnv)
	if !set {
		return "", false, nil
	}
	if err := os.Unsetenv(TokenEnv); err != nil {
		return "", true, err
	}
	if len(strings.TrimSpace(token)) < minTokenLen {
		return "", true, errors.New(TokenEnv + " is set but holds no usable token (at least 32 characters)")
	}
	return strings.TrimSpace(token), true, nil
}

// authorized says whether r carries "Authorization: Bearer <token>". The comparison
// takes the same time whatever the value: it compares digests of equal length.
func (b *Bridge) authorized(r *http.Request) bool {
	if b.opts.Token == "" {
		return true
	}
	scheme, credentials, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(credentials)))
	return subtle.ConstantTimeCompare(got[:], b.tokenDigest[:]) == 1
}

// refuseUnauthorized answers 401 without saying anything about the token.
func refuseUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="cantus-stdio-bridge"`)
	writeError(w, http.StatusUnauthorized, nil, codeInvalidRequest,
		"the stdio bridge needs its bearer token (Authorization: Bearer ...)", nil)
}

// newSessionID is 128 random bits: a client cannot guess another client's session.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ownerOf is whom a request belongs to for cancellation: the digest of the session id
// the client sent ("" without one). A digest keeps what the bridge holds per waiting
// request small whatever the client sends.
func ownerOf(r *http.Request) string {
	session := r.Header.Get(HeaderSessionID)
	if session == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(session))
	return string(sum[:])
}
