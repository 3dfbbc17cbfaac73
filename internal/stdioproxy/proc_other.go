//go:build !unix

package stdioproxy

import (
	"os"
	"syscall"
)

// Without process groups and SIGTERM, stopping means killing.
const (
	sigTerm = syscall.SIGKILL
	sigKill = syscall.SIGKILL
)

func childSysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, _ syscall.Signal) { _ = p.Kill() }
