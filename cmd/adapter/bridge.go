package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
)

const bridgeUsage = `usage:
  adapter bridge [--host 0.0.0.0] [--port 8765] [--restart-backoff-max 30s] [--request-timeout 60s]
                 [--shutdown-grace 10s] [--v 0] -- COMMAND [ARGS...]
  adapter bridge --install-to PATH

Runs COMMAND (as a list, never through a shell), speaks MCP over its stdin/stdout, and
serves it over streamable HTTP at /mcp (with /healthz and /readyz). Restarts COMMAND with
backoff when it exits. Prints "listening on http://HOST:PORT" once bound; logs to stderr.

$CANTUS_BRIDGE_TOKEN (at least 32 characters) is the bearer token every request to /mcp
must carry (Authorization: Bearer TOKEN); COMMAND does not inherit the variable. It is
required unless --host is a loopback address.
--install-to copies this executable to PATH and exits (the bridge pod's init container).
`

type bridgeFlags struct {
	host           string
	port           int
	backoffInitial time.Duration
	backoffMax     time.Duration
	requestTimeout time.Duration
	shutdownGrace  time.Duration
	stopGrace      time.Duration
	verbosity      int
	installTo      string
	argv           []string
	token          string
}

func parseBridgeFlags(args []string, stderr io.Writer) (*bridgeFlags, error) {
	f := &bridgeFlags{}
	fs := flag.NewFlagSet("adapter bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, bridgeUsage) }
	fs.StringVar(&f.host, "host", "0.0.0.0", "address to listen on")
	fs.IntVar(&f.port, "port", stdioproxy.DefaultPort, "port to listen on; 0 picks a free port")
	fs.DurationVar(&f.backoffInitial, "restart-backoff-initial", stdioproxy.DefaultRestartBackoffInitial, "delay before the first restart of COMMAND; it doubles with every exit")
	fs.DurationVar(&f.backoffMax, "restart-backoff-max", stdioproxy.DefaultRestartBackoffMax, "longest delay between restarts of COMMAND")
	fs.DurationVar(&f.requestTimeout, "request-timeout", stdioproxy.DefaultRequestTimeout, "how long a request waits for COMMAND's answer")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "on SIGTERM, how long in-flight requests may take before COMMAND is stopped")
	fs.DurationVar(&f.stopGrace, "stop-grace", stdioproxy.DefaultStopGrace, "how long COMMAND has after SIGTERM before SIGKILL")
	fs.IntVar(&f.verbosity, "v", 0, "log verbosity: 1 logs the messages the bridge drops")
	fs.StringVar(&f.installTo, "install-to", "", "copy this executable to PATH and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	f.argv = fs.Args()
	if f.installTo != "" {
		if len(f.argv) > 0 {
			return nil, errors.New("--install-to takes no command")
		}
		return f, nil
	}
	if len(f.argv) == 0 || f.argv[0] == "" {
		return nil, errors.New("no command: adapter bridge [flags] -- COMMAND [ARGS...]")
	}
	if f.port < 0 || f.port > 65535 {
		return nil, fmt.Errorf("--port %d is out of range: use 0..65535", f.port)
	}
	for name, d := range map[string]time.Duration{
		"--restart-backoff-initial": f.backoffInitial, "--restart-backoff-max": f.backoffMax,
		"--request-timeout": f.requestTimeout, "--stop-grace": f.stopGrace,
	} {
		if d <= 0 {
			return nil, fmt.Errorf("%s must be positive, not %s", name, d)
		}
	}
	if f.shutdownGrace < 0 {
		return nil, fmt.Errorf("--shutdown-grace must not be negative, not %s", f.shutdownGrace)
	}
	token, set, err := stdioproxy.TakeTokenFromEnv()
	if err != nil {
		return nil, err
	}
	if !set && !loopbackHost(f.host) {
		// Anything that can reach this address could call COMMAND's tools as the bridge.
		return nil, fmt.Errorf("serving %s needs a token: set %s (clients send Authorization: Bearer TOKEN), or listen on 127.0.0.1",
			f.host, stdioproxy.TokenEnv)
	}
	f.token = token
	return f, nil
}

// loopbackHost says whether host (a --host value) is a loopback address or localhost.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// bridgeCommand runs `adapter bridge`.
func bridgeCommand(args []string, stdout, stderr io.Writer) int {
	flags, err := parseBridgeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "adapter bridge: %v\n%s", err, bridgeUsage)
		return exitUsage
	}
	if flags.installTo != "" {
		if err := installSelf(flags.installTo); err != nil {
			fmt.Fprintf(stderr, "adapter bridge: %v\n", err)
			return exitError
		}
		fmt.Fprintf(stdout, "installed %s\n", flags.installTo)
		return exitOK
	}
	log := newLogger(stderr, flags.verbosity).WithName("bridge")
	b, err := stdioproxy.New(flags.argv, stdioproxy.Options{
		Logger:                log,
		Token:                 flags.token,
		RequestTimeout:        flags.requestTimeout,
		RestartBackoffInitial: flags.backoffInitial,
		RestartBackoffMax:     flags.backoffMax,
		StopGrace:             flags.stopGrace,
	})
	if err != nil {
		fmt.Fprintf(stderr, "adapter bridge: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(flags.host, strconv.Itoa(flags.port)))
	if err != nil {
		log.Error(err, "listen")
		return exitError
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr().String())

	signals, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	childCtx, stopChild := context.WithCancel(context.Background())
	childDone := make(chan struct{})
	go func() {
		defer close(childDone)
		_ = b.Run(childCtx)
	}()
	srv := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	code := exitOK
	select {
	case <-signals.Done():
		// A second signal during the shutdown kills the process at once.
		stopSignals()
		log.Info("shutting down: finishing in-flight requests, then stopping the stdio server",
			"grace", flags.shutdownGrace.String())
		b.Drain()
		ctx, cancel := context.WithTimeout(context.Background(), flags.shutdownGrace)
		if err := srv.Shutdown(ctx); err != nil {
			log.Info("in-flight requests did not finish within the grace period", "error", err.Error())
			_ = srv.Close()
		}
		cancel()
	case err := <-served:
		log.Error(err, "serving stopped")
		code = exitError
	}
	stopChild()
	<-childDone
	log.Info("bridge stopped")
	return code
}

// installSelf copies the running executable to dst (mode 0755), through a temporary file
// in dst's folder and a rename, so a half-written binary is never left at dst.
func installSelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this executable: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".adapter-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("copy %s to %s: %w", self, dst, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
