package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
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
	return startAdapter(label, token, adapterconfig.Tool{
		Name:        toolName,
		Description: toolDesc,
		InputSchema: json.RawMessage(toolSchema),
		Template:    &adapterconfig.TemplateBackend{Text: toolTemplate},
	})
}

// startAdapter serves tool with the adapter as the controller renders it by default.
// Its stop also closes the server, which ends a gateway's pooled session to its remote.
func startAdapter(label, token string, tool adapterconfig.Tool) (string, func(), error) {
	return serveConfig(label, token, &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "cantus-bench-" + label, Version: "0.0.0"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Stateless: true,
		Tools:     []adapterconfig.Tool{tool},
	})
}

// serveConfig serves an adapter config under the pprof label.
func serveConfig(label, token string, cfg *adapterconfig.Config) (string, func(), error) {
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
	return base + adapterconfig.PathMCP, func() {
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

// contentFolder is a temporary folder of content files named by their digest, as the
// kubernetes runtime mounts a SkillServer's content.
type contentFolder struct{ dir string }

func newContentFolder() (*contentFolder, error) {
	dir, err := os.MkdirTemp("", "cantus-bench-content-")
	if err != nil {
		return nil, fmt.Errorf("content folder: %w", err)
	}
	return &contentFolder{dir: dir}, nil
}

// add stores text and returns its digest ("sha256:<hex>").
func (f *contentFolder) add(text string) (string, error) {
	sum := sha256.Sum256([]byte(text))
	if err := os.WriteFile(filepath.Join(f.dir, hex.EncodeToString(sum[:])), []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("content folder: %w", err)
	}
	return adapterconfig.DigestPrefix + hex.EncodeToString(sum[:]), nil
}

func (f *contentFolder) remove() { _ = os.RemoveAll(f.dir) }

// serve serves cfg with its content in the folder, which its stop removes (as does a
// failure to serve).
func (f *contentFolder) serve(label, token string, cfg *adapterconfig.Config) (string, func(), error) {
	cfg.ContentDir = f.dir
	url, stop, err := serveConfig(label, token, cfg)
	if err != nil {
		f.remove()
		return "", nil, err
	}
	return url, func() {
		stop()
		f.remove()
	}, nil
}
