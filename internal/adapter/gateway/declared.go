package gateway

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// Declared remembers, on a stateless gateway, what each caller declared at its last
// initialize that the gateway may ask of it: URL-mode elicitation, to be asked to
// connect with URLElicitationRequiredError (-32042), which needs no session; and
// elicitation, sampling and roots, to be asked what a remote asks (answers.go). A
// stateful gateway reads them from the caller's session; a stateless one keeps none.
// What is remembered is this replica's: a caller that initialized on another replica
// gets the tool error that carries the same URL, and is not asked. A caller (its
// admission key: identity, else address) running several clients is known by the last
// one that initialized here. Bounded like the callers' sessions, the least recently
// used going first.
type Declared struct {
	callers *lru.Cache[string, mcp.ClientCapabilities]
}

// NewDeclared returns an empty memory of adapterconfig.DefaultMaxCallers callers.
func NewDeclared() *Declared {
	cache, _ := lru.New[string, mcp.ClientCapabilities](adapterconfig.DefaultMaxCallers) // errors only for a size <= 0
	return &Declared{callers: cache}
}

// Remember records what the caller of ctx declared at initialize, of what a gateway
// asks (nothing else: a caller's experimental capabilities could be large); a caller
// without a key is not remembered.
func (d *Declared) Remember(ctx context.Context, caps mcp.ClientCapabilities) {
	if caller := callerKeyOf(ctx); caller != "" {
		d.callers.Add(caller, mcp.ClientCapabilities{Elicitation: caps.Elicitation, Sampling: caps.Sampling, Roots: caps.Roots})
	}
}

// capabilities are what caller declared; false when it is not remembered.
func (d *Declared) capabilities(caller string) (mcp.ClientCapabilities, bool) {
	if d == nil || caller == "" {
		return mcp.ClientCapabilities{}, false
	}
	return d.callers.Get(caller)
}

func (d *Declared) declaredURLElicitation(caller string) bool {
	caps, ok := d.capabilities(caller)
	return ok && declaresURLElicitation(&caps)
}

// declares says whether caller declared the capability a relayed request of kind needs.
func (d *Declared) declares(caller, kind string) bool {
	caps, ok := d.capabilities(caller)
	return ok && declares(&caps, kind)
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
