package workload

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
	"github.com/cantus-dev/cantus-operator/internal/stdioproxy/proxytest"
)

// fakeAdapterName is the role of the test binary that stands in for the adapter binary.
const fakeAdapterName = "fake-adapter"

func TestMain(m *testing.M) {
	proxytest.Main(m, map[string]func([]string) int{
		proxytest.FakeServerName: proxytest.FakeServer,
		fakeAdapterName:          runFakeAdapter,
	})
}

// runFakeAdapter is what cmd/adapter's bridge subcommand does, reduced to what the local
// runtime relies on: listen, print the listening line, serve, stop on SIGTERM.
func runFakeAdapter(args []string) int {
	if len(args) == 0 || args[0] != "bridge" {
		fmt.Fprintln(os.Stderr, "fake adapter: only the bridge subcommand")
		return 2
	}
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	host := fs.String("host", "0.0.0.0", "")
	port := fs.Int("port", 8765, "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	token, _, err := stdioproxy.TakeTokenFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b, err := stdioproxy.New(fs.Args(), stdioproxy.Options{Logger: log, StopGrace: time.Second, Token: token})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	childCtx, stopChild := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Run(childCtx); close(done) }()
	srv := &http.Server{Handler: b.Handler()}
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	b.Drain()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(shutdown)
	cancel()
	stopChild()
	<-done
	return 0
}
