package policy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/egress"
)

// ErrRefused wraps every refusal the dialer or the redirect check makes.
var ErrRefused = errors.New("refused by ToolSourcePolicy")

// DialContext checks host:port against the policies at the moment of connecting and
// connects only to an address it has just checked, never re-resolving the name.
func (c *Checker) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("split %q: %w", address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("port of %q: %w", address, err)
	}
	d := c.CheckHostPort(ctx, host, port)
	if !d.Allowed {
		return nil, fmt.Errorf("%w: %s", ErrRefused, d.Message)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return egress.DialFirst(ctx, dialer, network, d.Addresses, uint16(port))
}

// CheckRedirect refuses a redirect to a host or port the policies do not allow.
func (c *Checker) CheckRedirect(target *url.URL) error {
	d := c.CheckHostPort(context.Background(), target.Hostname(), portOf(target))
	if !d.Allowed {
		return fmt.Errorf("%w: redirect to %s: %s", ErrRefused, target.Redacted(), d.Message)
	}
	return nil
}
