package main

import (
	"fmt"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// The hop comparison (-hop, with the gateway's): a bare reverse proxy in front of the
// remote, the floor of a gateway served by net/http.

// hopComparison measures a bare HTTP reverse proxy in front of the remote at remoteURL
// against the direct call: the extra HTTP hop alone, with the gateway's targets for
// reference.
func hopComparison(remoteURL string, newTarget func(name, url, tool string) target) (comparison, func(), error) {
	proxyURL, stopProxy, err := startHop(remoteURL)
	if err != nil {
		return comparison{}, nil, err
	}
	return comparison{
		name:    nameHop,
		title:   fmt.Sprintf("hop/direct: tools/call %s through a bare HTTP reverse proxy (no MCP work) against the direct call: the extra HTTP hop alone; the gateway's targets for reference", toolName),
		a:       newTarget(nameHop, proxyURL, toolName),
		b:       newTarget(nameDirect, remoteURL, toolName),
		targets: gatewayTargets,
	}, stopProxy, nil
}

// startHop serves a reverse proxy to the remote at remoteURL, over the transport the
// gateway's MCP client uses (mcpclient.Transport), so that the two differ only in the
// gateway's MCP work.
func startHop(remoteURL string) (string, func(), error) {
	target, err := url.Parse(remoteURL)
	if err != nil {
		return "", nil, fmt.Errorf("hop: %w", err)
	}
	transport, err := mcpclient.NewTransport(mcpclient.TransportConfig{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second})
	if err != nil {
		return "", nil, fmt.Errorf("hop: %w", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = target.Path
		},
		Transport:  transport,
		BufferPool: &copyBuffers{},
	}
	base, stop, err := serveLabelled(nameHop, proxy)
	if err != nil {
		return "", nil, err
	}
	return base + adapterconfig.PathMCP, stop, nil
}

// copyBuffers keeps the reverse proxy's copy buffers for reuse, which it would
// otherwise allocate per request (32 KiB each).
type copyBuffers struct{ pool sync.Pool }

func (b *copyBuffers) Get() []byte {
	if buf, ok := b.pool.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *copyBuffers) Put(buf []byte) { b.pool.Put(&buf) }
