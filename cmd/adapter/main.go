// Command adapter is the MCP server of a SkillServer pod: it serves the tools of one
// rendered adapter config.
//
//	adapter [serve] --config PATH [--host 0.0.0.0] [--port N] [--metrics-port N] [--drain-delay 0s] [--shutdown-grace 25s] [--reload-interval 2s] [--v 0]
//	adapter version
//
// After binding, serve prints one line to stdout, "listening on http://HOST:PORT";
// scripts and tests parse it. With --metrics-port it then prints a second line,
// "metrics on http://HOST:PORT", the only place /metrics is served. Logs go to stderr
// as JSON.
//
// serve watches the config file and applies a changed one in place (Server.Reload):
// connected sessions are told the tool list changed. An invalid new config, or one that
// changes what needs a restart, is logged and the previous config keeps being served.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/gomemlimit"
	"github.com/cantus-dev/cantus-operator/internal/periodic"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// version is stamped at build time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	// The adapter logs nothing about it: it serves on stdout in stdio mode.
	_, _ = gomemlimit.FromContainer()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches the subcommand; serve is the default so that "adapter --config X"
// works as the container's whole command line.
func run(args []string, stdout, stderr io.Writer) int {
	command, rest := "serve", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, rest = args[0], args[1:]
	}
	switch command {
	case "serve":
		return serve(rest, stdout, stderr)
	case "probe":
		return probeCommand(rest, stdout, stderr)
	case "memory":
		return memoryCommand(rest, stdout, stderr)
	case "bridge":
		return bridgeCommand(rest, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "cantus-adapter %s %s\n", version, runtime.Version())
		return exitOK
	case "help":
		printUsage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "adapter: unknown command %q\n", command)
		printUsage(stderr)
		return exitUsage
	}
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `usage:
  adapter [serve] --config PATH [--host 0.0.0.0] [--port N] [--metrics-port N] [--drain-delay 0s] [--shutdown-grace 25s] [--reload-interval 2s] [--v 0]
  adapter probe [--transport streamable-http|sse] [--header 'Name: value']... [--timeout 10s] [--ca-file PEM] URL
  adapter memory trash|journal|restore --config PATH [TRASH_ID]
  adapter version
`)
}

type serveFlags struct {
	config        string
	host          string
	port          int
	portSet       bool
	metricsPort   int
	drainDelay    time.Duration
	shutdownGrace time.Duration
	reloadEvery   time.Duration
	verbosity     int
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("adapter serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "path of the adapter config (JSON)")
	fs.StringVar(&f.host, "host", "0.0.0.0", "address to listen on")
	fs.IntVar(&f.port, "port", 0, "port to listen on, overriding the config's; 0 picks a free port")
	fs.IntVar(&f.metricsPort, "metrics-port", -1, "port of /metrics, apart from the MCP port; 0 picks a free port, -1 serves no metrics")
	fs.DurationVar(&f.drainDelay, "drain-delay", adapter.DefaultDrainDelay, "after readiness fails, keep taking new calls this long")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", adapter.DefaultShutdownGrace, "how long shutdown may take, in-flight calls included")
	fs.DurationVar(&f.reloadEvery, "reload-interval", defaultReloadInterval, "how often to look for a changed config file and apply it in place; 0 turns it off")
	fs.IntVar(&f.verbosity, "v", 0, "log verbosity: 1 logs failed tool calls, 2 every call")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if f.config == "" {
		return nil, errors.New("--config is required")
	}
	fs.Visit(func(fl *flag.Flag) { f.portSet = f.portSet || fl.Name == "port" })
	if f.portSet && (f.port < 0 || f.port > 65535) {
		return nil, fmt.Errorf("--port %d is out of range: use 0..65535", f.port)
	}
	if f.metricsPort < -1 || f.metricsPort > 65535 {
		return nil, fmt.Errorf("--metrics-port %d is out of range: use -1 (off) or 0..65535", f.metricsPort)
	}
	if f.reloadEvery < 0 {
		return nil, fmt.Errorf("--reload-interval %s must not be negative", f.reloadEvery)
	}
	return f, nil
}

func serve(args []string, stdout, stderr io.Writer) int {
	flags, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "adapter serve: %v\n", err)
		return exitUsage
	}
	log := newLogger(stderr, flags.verbosity)
	if err := serveConfig(flags, stdout, log); err != nil {
		log.Error(err, "adapter stopped")
		return exitError
	}
	return exitOK
}

func serveConfig(flags *serveFlags, stdout io.Writer, log logr.Logger) error {
	// The digest is taken before the config is read: a change in between is then
	// seen, and applied, by the first poll.
	loaded, _ := configDigest(flags.config)
	cfg, err := adapterconfig.Load(flags.config)
	if err != nil {
		return err
	}
	if flags.portSet {
		cfg.Port = int32(flags.port)
	}
	// Tracing is set by the operator through the OTEL_* variables of the pod, never by
	// the adapter config a tenant's SkillServer renders.
	endTracing, err := tracing.Setup(context.Background(), "cantus-adapter")
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		if err := endTracing(context.Background()); err != nil {
			log.Error(err, "flushing the last spans failed")
		}
	}()
	srv, err := adapter.NewServer(cfg,
		adapter.WithLogger(log),
		adapter.WithDrainDelay(flags.drainDelay),
		adapter.WithShutdownGrace(flags.shutdownGrace),
	)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(flags.host, strconv.Itoa(int(cfg.Port))))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr().String())
	if flags.metricsPort >= 0 {
		stopMetrics, err := serveMetrics(flags, srv, stdout, log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer stopMetrics()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		// A second signal during the graceful shutdown kills the process at once.
		<-ctx.Done()
		stop()
	}()
	if flags.reloadEvery > 0 {
		go watchConfig(ctx, flags, loaded, srv, log.WithName("reload"))
	}
	return srv.Serve(ctx, ln)
}

// serveMetrics serves srv's /metrics on its own port: it lists every tool, also those
// tools/list hides from a caller, so it is kept off the MCP port the Service exposes.
// The returned function stops it.
func serveMetrics(flags *serveFlags, srv *adapter.Server, stdout io.Writer, log logr.Logger) (func(), error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(flags.host, strconv.Itoa(flags.metricsPort)))
	if err != nil {
		return nil, fmt.Errorf("listen for metrics: %w", err)
	}
	fmt.Fprintf(stdout, "metrics on http://%s\n", ln.Addr().String())
	metrics := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := metrics.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving metrics ended", "address", ln.Addr().String())
		}
	}()
	return func() { _ = metrics.Close() }, nil
}

// defaultReloadInterval is how often serve looks at the config file.
const defaultReloadInterval = 2 * time.Second

func configDigest(path string) ([sha256.Size]byte, []byte) {
	data, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, nil
	}
	return sha256.Sum256(data), data
}

// watchConfig polls the config file for a changed content digest and applies it with
// Reload until ctx ends. It polls rather than using inotify: a ConfigMap volume is
// updated by swapping a symlink (..data) to a new directory, which a watch on the file
// itself does not see. A config that cannot be read, parsed or applied is logged once
// per content and the one being served stays.
func watchConfig(ctx context.Context, flags *serveFlags, last [sha256.Size]byte, srv *adapter.Server, log logr.Logger) {
	periodic.Run(ctx, flags.reloadEvery, func() {
		digest, data := configDigest(flags.config)
		if data == nil || digest == last {
			// A file missing for a moment (mid-update) is no change.
			return
		}
		last = digest
		log.Info("config file changed; reloading", "path", flags.config, "sha256", hex.EncodeToString(digest[:8]))
		var cfg adapterconfig.Config
		if err := json.Unmarshal(data, &cfg); err != nil {
			log.Error(err, "the new config does not parse; still serving the previous one", "path", flags.config)
			return
		}
		if flags.portSet {
			cfg.Port = int32(flags.port)
		}
		if err := srv.Reload(&cfg); err != nil {
			log.Error(err, "the new config was not applied; still serving the previous one", "path", flags.config)
		}
	})
}

// newLogger writes JSON lines to stderr; logr verbosity n maps to slog level -n.
func newLogger(w io.Writer, verbosity int) logr.Logger {
	handler := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       slog.Level(-verbosity),
		ReplaceAttr: verbosityLevelNames,
	})
	return logr.FromSlogHandler(handler).WithName("adapter")
}

// verbosityLevelNames prints logr's V(n) as "V1", "V2", … rather than slog's
// "DEBUG+3", which reads as a debug level of its own.
func verbosityLevelNames(_ []string, a slog.Attr) slog.Attr {
	if a.Key != slog.LevelKey {
		return a
	}
	if level, ok := a.Value.Any().(slog.Level); ok && level < slog.LevelInfo {
		a.Value = slog.StringValue(fmt.Sprintf("V%d", -int(level)))
	}
	return a
}
