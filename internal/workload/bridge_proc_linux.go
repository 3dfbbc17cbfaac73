//go:build linux

package workload

import "syscall"

// bridgeSysProcAttr gives the bridge processes of the local runtime SIGTERM when the
// operator dies, so they stop their own child then instead of outliving the operator.
func bridgeSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
