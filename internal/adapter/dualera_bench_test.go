package adapter

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/test/testenv/dualera"
)

// BenchmarkDualEraGateway_CallAgainstAReverseProxy prints the throughput of a
// tools/call through a stateless gateway to a dual-era remote (mcp-go, stateless)
// against the same call through a bare reverse proxy to it, in each era: 2026-07-28
// (forwarded in 2026-07-28, callModern) and 2025-11-25 without a session (the
// pass-through). Issue 37's target is ≥ 0.95× of the proxy. Slices alternate (ABBA)
// so that a busy machine weighs on both sides alike. Run it with
// -bench DualEraGateway -benchtime 1x.
func BenchmarkDualEraGateway_CallAgainstAReverseProxy(b *testing.B) {
	remote := dualera.Start(b, dualera.Both)
	gatewayURL := serveForBench(b, configWith(adapterconfig.TransportStreamableHTTP, true, plainDualEraTools(remote.URL, adapterconfig.EraModern, adapterconfig.EraLegacy)...))
	target, _ := url.Parse(remote.URL)
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	// Kept-alive connections as deep as the gateway's pool, so that the proxy is not
	// measured reconnecting.
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	proxy := httptest.NewServer(rp)
	b.Cleanup(proxy.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, era := range []string{adapterconfig.EraModern, protocol20250618} {
		viaGateway := benchCaller{http: client, url: gatewayURL + adapterconfig.PathMCP, tool: "team.echo", protocol: era}
		viaProxy := benchCaller{http: client, url: proxy.URL + "/mcp", tool: dualera.ToolEcho, protocol: era}
		for _, c := range []benchCaller{viaGateway, viaProxy} {
			if err := c.call(); err != nil {
				b.Fatalf("%s: %v", c.url, err)
			}
		}
		const workers, rounds, slice = 8, 4, 300 * time.Millisecond
		var gateway, direct int64
		for r := range rounds {
			order := []bool{true, false, false, true}
			if r%2 == 1 {
				order = []bool{false, true, true, false}
			}
			for _, isGateway := range order {
				c := viaProxy
				if isGateway {
					c = viaGateway
				}
				n, err := c.run(workers, slice)
				if err != nil {
					b.Fatal(err)
				}
				if isGateway {
					gateway += n
				} else {
					direct += n
				}
			}
		}
		seconds := (rounds * 2 * slice).Seconds()
		ratio := float64(gateway) / float64(direct)
		fmt.Printf("protocol %s, %d workers: gateway %.0f calls/s, bare reverse proxy %.0f calls/s: %.3f× (target ≥ 0.95×)\n",
			era, workers, float64(gateway)/seconds, float64(direct)/seconds, ratio)
		b.ReportMetric(ratio, "gateway/proxy-"+era)
	}
}

// serveForBench serves cfg on a loopback port until the benchmark ends and returns its
// base URL.
func serveForBench(b *testing.B, cfg *adapterconfig.Config) string {
	b.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

type benchCaller struct {
	http                *http.Client
	url, tool, protocol string
}

// call makes one tools/call of text "hi" and checks the echo.
func (c benchCaller) call() error {
	meta := ""
	if c.protocol == adapterconfig.EraModern {
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":{"text":"hi"}` + meta + `}}`
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", c.protocol)
	if c.protocol == adapterconfig.EraModern {
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", c.tool)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), "echo: hi") {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	return nil
}

// run calls from workers goroutines for d and returns the calls answered.
func (c benchCaller) run(workers int, d time.Duration) (int64, error) {
	var n atomic.Int64
	var failed atomic.Pointer[error]
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := c.call(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return 0, *err
	}
	return n.Load(), nil
}
