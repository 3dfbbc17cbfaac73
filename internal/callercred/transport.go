package callercred

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/egress"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// httpClient is the client the exchanger speaks to the token endpoint with: dialled
// only at the addresses the operator's policy check accepted (when listed), trusting
// only the CA file (when set), through no proxy, and following no redirect — a
// redirected POST would carry the caller's token to a host nobody checked.
func httpClient(addresses []string, caFile string, timeout time.Duration) (*http.Client, error) {
	dial, err := pinnedDialer(addresses)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	if caFile != "" {
		pool, err := egress.CertPoolFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("the token endpoint's CA file: %w", err)
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the token endpoint redirected; redirects are not followed")
		},
	}, nil
}

// pinnedDialer connects only to the checked addresses (mcpclient.PinnedDialer, as the
// gateway dials remotes); the default dialer when none are listed.
func pinnedDialer(addresses []string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	dial, err := mcpclient.PinnedDialer(addresses)
	if err != nil {
		return nil, fmt.Errorf("token endpoint: %w", err)
	}
	if dial == nil {
		var d net.Dialer
		return d.DialContext, nil
	}
	return dial, nil
}

// checkEndpoint refuses a token endpoint the caller's token must not be sent to: not
// an absolute URL, or plain HTTP off loopback.
func checkEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("token endpoint: %w", err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("token endpoint %q must be an absolute URL without user info or fragment", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("token endpoint %q: plain http is allowed on loopback only", raw)
		}
	default:
		return nil, fmt.Errorf("token endpoint %q: the scheme must be https", raw)
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
