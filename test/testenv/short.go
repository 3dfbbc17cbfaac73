package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
)

// shortReason says why a test that needs envtest does not run under -short.
const shortReason = "needs envtest (kube-apiserver and etcd), which -short (make test-unit) leaves out; make test runs it"

// ExitUnderShort ends, before it starts envtest, a test binary whose TestMain starts
// envtest for every test, when it runs with -short (make test-unit): the fast loop has
// no API server. It says so on stdout, so the skip shows in go test -v.
func ExitUnderShort() {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		fmt.Println("skip: every test of this package", shortReason)
		os.Exit(0)
	}
}

// StartForTest starts envtest (with the CRDs) for one test and stops it when the test
// ends; under -short it skips the test instead.
func StartForTest(t testing.TB) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("this test " + shortReason)
	}
	env, cfg, err := Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}
