package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
)

// The servers the comparisons share: every server is served under its pprof label, and
// the adapter as the controller renders it by default.

// serveLabelled serves h on a fresh 127.0.0.1 listener. The serving goroutine carries
// the pprof label server=name, which every connection goroutine inherits, so profiles
// split by server at no per-request cost.
func serveLabelled(name string, h http.Handler) (baseURL string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen for %s: %w", name, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: callTimeout,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("server", name), func(context.Context) {
		defer close(done)
		_ = srv.Serve(ln)
	})
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// startTemplateAdapter serves the skill with the adapter as the controller renders it
// by default: streamable HTTP, stateless. label is the pprof label of its connections:
// nameAdapter, or nameRemote for the remote the gateway re-exports from.
func startTemplateAdapter(label, token string) (string, func(), error) {
	return startAdapter(label, token, adapter.Tool{
		Name:        toolName,
		Description: toolDesc,
		InputSchema: json.RawMessage(toolSchema),
		Template:    &adapter.TemplateBackend{Text: toolTemplate},
	})
}

// startAdapter serves tool with the adapter as the controller renders it by default.
// Its stop also closes the server, which ends a gateway's pooled session to its remote.
func startAdapter(label, token string, tool adapter.Tool) (string, func(), error) {
	return serveConfig(label, token, &adapter.Config{
		Server:    adapter.ServerInfo{Name: "cantus-bench-" + label, Version: "0.0.0"},
		Transport: adapter.TransportStreamableHTTP,
		Stateless: true,
		Tools:     []adapter.Tool{tool},
	})
}

// serveConfig serves an adapter config under the pprof label.
func serveConfig(label, token string, cfg *adapter.Config) (string, func(), error) {
	cfg.Limits = callLimits
	var opts []adapter.Option
	if token != "" {
		opts = append(opts, adapter.WithBearerToken(token))
	}
	srv, err := adapter.NewServer(cfg, opts...)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", label, err)
	}
	base, stop, err := serveLabelled(label, srv.Handler())
	if err != nil {
		_ = srv.Close()
		return "", nil, err
	}
	return base + adapter.PathMCP, func() {
		stop()
		_ = srv.Close()
	}, nil
}

// stops runs the stops of what a comparison started, the last started first.
type stops []func()

func (s stops) run() {
	for i := len(s) - 1; i >= 0; i-- {
		s[i]()
	}
}
