// Command pause is the sandbox image's process for the one-node cluster (hack/cluster.sh):
// it holds the pod's namespaces open until the kubelet stops the sandbox. A local build,
// because the node may not pull registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of the sandbox it also inherits orphans; reaping them keeps no zombie around.
	reap := make(chan os.Signal, 1)
	signal.Notify(reap, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-reap:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
