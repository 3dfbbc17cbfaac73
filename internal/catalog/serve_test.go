package catalog

import (
	"context"
	"net"
	"testing"

	"github.com/go-logr/logr"
)

// A listener asked for port 0 says, once prepared, the port it took: connect links and
// the gateways' token endpoint are built from it.
func TestPreparedListenerSaysThePortItTook(t *testing.T) {
	r := &Runnable{Addr: "127.0.0.1:0", Log: logr.Discard()}
	if err := r.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.ln.Close() })
	_, port, err := net.SplitHostPort(r.Address())
	if err != nil || port == "0" || port == "" {
		t.Fatalf("Address() = %q, want 127.0.0.1 with the port taken", r.Address())
	}
}
