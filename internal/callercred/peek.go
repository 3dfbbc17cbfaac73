package callercred

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// peekClaims reads a JWT's aud and exp without verifying it: only to refuse an answer
// (sharesAudience) or to learn a lifetime the answer did not state, never to trust it.
func peekClaims(token string) (aud []string, exp int64, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, 0, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, 0, false
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
		Exp json.Number     `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return nil, 0, false
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		aud = []string{one}
	} else {
		_ = json.Unmarshal(claims.Aud, &aud)
	}
	if f, err := claims.Exp.Float64(); err == nil {
		exp = int64(f)
	}
	return aud, exp, true
}

// sharesAudience reports whether the exchanged token is good for an audience the
// caller's token was: the remote could then replay it to the gateway (or wherever the
// caller's token is accepted).
func sharesAudience(exchanged, subject string) bool {
	newAud, _, ok := peekClaims(exchanged)
	if !ok || len(newAud) == 0 {
		return false
	}
	oldAud, _, ok := peekClaims(subject)
	if !ok {
		return false
	}
	for _, a := range newAud {
		for _, b := range oldAud {
			if a != "" && a == b {
				return true
			}
		}
	}
	return false
}
