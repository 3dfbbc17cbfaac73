//go:build linux

package stdioproxy

import (
	"os"
	"syscall"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// childSysProcAttr puts the child in a process group of its own, so that stopping it
// reaches whatever it started (npx → node, a shell script's children), and kills it if
// the bridge itself dies without stopping it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process group p leads (p itself when that fails).
func signalGroup(p *os.Process, sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		_ = p.Signal(sig)
	}
}
