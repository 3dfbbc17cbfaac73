package mcpclient

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/cantus-dev/cantus-operator/internal/egress"
)

// PinnedDialer connects only to addresses (IP literals), at the port asked for: the
// operator's ToolSourcePolicy check resolved a host to them and accepted them, and a DNS
// answer that changed since is not followed. The gateway dials remotes and token
// endpoints through it. With no addresses it is nil: the default dialer.
func PinnedDialer(addresses []string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	if len(addresses) == 0 {
		return nil, nil
	}
	pinned := make([]netip.Addr, 0, len(addresses))
	for _, a := range addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("checked address %q: %w", a, err)
		}
		pinned = append(pinned, ip)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("split %q: %w", addr, err)
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port of %q: %w", addr, err)
		}
		conn, err := egress.DialFirst(ctx, &net.Dialer{}, network, pinned, uint16(port))
		if err != nil {
			return nil, fmt.Errorf("no checked address of %s answered: %w", addr, err)
		}
		return conn, nil
	}, nil
}
