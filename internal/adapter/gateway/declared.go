package gateway

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Declared remembers, on a stateless gateway, whether each caller declared URL-mode
// elicitation at its last initialize. A stateful gateway reads that from the caller's
// session; a stateless one keeps none, yet a 2025-11-25 caller that declared it should
// be asked to connect with URLElicitationRequiredError (-32042), which needs no session.
// What is remembered is this replica's: a caller that initialized on another replica
// gets the tool error that carries the same URL. A caller identity running several
// clients is known by the last one that initialized here. Bounded like the callers'
// sessions, the least recently used going first.
type Declared struct {
	urlElicitation *lru.Cache[string, bool]
}

// NewDeclared returns an empty memory of adapterconfig.DefaultMaxCallers callers.
func NewDeclared() *Declared {
	cache, _ := lru.New[string, bool](adapterconfig.DefaultMaxCallers) // errors only for a size <= 0
	return &Declared{urlElicitation: cache}
}

// Remember records what the caller identity declared at initialize; a caller without
// an identity is not remembered.
func (d *Declared) Remember(identity string, caps mcp.ClientCapabilities) {
	if identity == "" {
		return
	}
	d.urlElicitation.Add(identity, declaresURLElicitation(&caps))
}

func (d *Declared) declaredURLElicitation(identity string) bool {
	if d == nil || identity == "" {
		return false
	}
	declared, _ := d.urlElicitation.Get(identity)
	return declared
}

type declaredKey struct{}

// WithDeclared gives the request of ctx the memory its caller's declaration is read from.
func WithDeclared(ctx context.Context, d *Declared) context.Context {
	return context.WithValue(ctx, declaredKey{}, d)
}

func declaredFrom(ctx context.Context) *Declared {
	d, _ := ctx.Value(declaredKey{}).(*Declared)
	return d
}
