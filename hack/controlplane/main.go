// Command controlplane runs a real kube-apiserver and etcd (the envtest binaries built by
// hack/envtest.sh) with the cantus CRDs installed, writes an admin kubeconfig, and runs
// until SIGTERM. `make demo` starts it; `make demo-down` stops it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cantus-dev/cantus-operator/test/testenv"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", ".demo/kubeconfig", "where to write the admin kubeconfig")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

func run(kubeconfigPath string) error {
	env, _, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "controlplane: stop:", err)
		}
	}()
	admin, err := env.ControlPlane.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfigPath), 0o750); err != nil {
		return fmt.Errorf("create kubeconfig folder: %w", err)
	}
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	fmt.Printf("control plane ready at %s; kubeconfig %s\n", env.Config.Host, kubeconfigPath)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}
