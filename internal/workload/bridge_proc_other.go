//go:build !linux

package workload

import "syscall"

// bridgeSysProcAttr: only Linux has a parent-death signal.
func bridgeSysProcAttr() *syscall.SysProcAttr { return nil }
