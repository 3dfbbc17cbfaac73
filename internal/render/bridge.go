package render

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The Secret of a stdio import's bridge (one per import, named like the bridge, owned
// by the import) holds the bearer token the bridge requires: under BridgeTokenKey the
// token itself, which the bridge container reads, and under BridgeAuthorizationKey the
// Authorization header's value ("Bearer <token>"), which the gateways of the
// SkillServers that import it send like any header an import reads from a Secret.
const (
	BridgeTokenKey         = "token"
	BridgeAuthorizationKey = "authorization"
)

// bridgeAuthorizationHeader is the header the bridge checks.
const bridgeAuthorizationHeader = "Authorization"

const (
	bridgeNameSuffix  = "-bridge"
	maxServiceNameLen = 63
)

// BridgeName is the name of a stdio import's bridge objects (Deployment, Service,
// NetworkPolicy, Secret): <import>-bridge. A Service name is a DNS label (at most 63
// characters, starting with a letter), so a longer import name is cut and made unique
// with a hash, and one starting with a digit gets a letter in front.
func BridgeName(importName string) string {
	name := importName + bridgeNameSuffix
	if len(name) <= maxServiceNameLen && name[0] >= 'a' && name[0] <= 'z' && !strings.Contains(name, ".") {
		return name
	}
	sum := sha256.Sum256([]byte(importName))
	hash := hex.EncodeToString(sum[:])[:8]
	prefix := strings.ReplaceAll(importName, ".", "-")
	if prefix[0] < 'a' || prefix[0] > 'z' {
		prefix = "b" + prefix
	}
	keep := maxServiceNameLen - len(bridgeNameSuffix) - len(hash) - 1
	if len(prefix) > keep {
		prefix = prefix[:keep]
	}
	return strings.TrimRight(prefix, "-") + "-" + hash + bridgeNameSuffix
}
