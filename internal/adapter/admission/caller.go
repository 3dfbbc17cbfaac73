package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/cantus-dev/cantus-operator/internal/access"
)

// CallerIdentity names who makes r for session binding: the authenticated caller (a
// static token by its digest, as all its holders share one Caller), else the client's
// IP address (not its port, which changes per connection).
func CallerIdentity(r *http.Request) string {
	if c, ok := access.CallerFrom(r.Context()); ok && c != nil {
		if c.Kind == access.KindBearer {
			token := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			sum := sha256.Sum256([]byte(token))
			return "bearer:" + hex.EncodeToString(sum[:])
		}
		return c.Kind + "\x00" + c.Issuer + "\x00" + c.Subject + "\x00" + c.ServiceAccount
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "address:" + host
}

// CallerKey names who makes r for its per-caller budget and shares (limits.go): as
// CallerIdentity, except that a client without auth is known by its IPv6 /64 (a host
// or a customer holds a /64 and may take any address in it) or its IPv4 address.
func CallerKey(r *http.Request) string {
	if c, ok := access.CallerFrom(r.Context()); ok && c != nil {
		return CallerIdentity(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return "address:" + host
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is6() {
		prefix, _ := addr.Prefix(64)
		return "address:" + prefix.String()
	}
	return "address:" + addr.String()
}
