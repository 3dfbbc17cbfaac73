package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// cpuSample is the CPU time each process of the run has used so far: the API server and
// etcd (envtest's children of this process), the manager, and this bench.
type cpuSample map[string]time.Duration

// sampleCPU reads the CPU times of the API server, etcd, this bench and, when pid is not
// zero, the manager. On two cores they all share, what one uses the others cannot.
func sampleCPU(managerPID int) cpuSample {
	s := cpuSample{"bench": processCPU(os.Getpid())}
	if managerPID != 0 {
		s["manager"] = processCPU(managerPID)
	}
	for _, pid := range childrenOf(os.Getpid()) {
		switch name := processName(pid); name {
		case "kube-apiserver", "etcd":
			s[name] += processCPU(pid)
		}
	}
	return s
}

// since is the CPU each process used between earlier and s.
func (s cpuSample) since(earlier cpuSample) cpuSample {
	out := cpuSample{}
	for name, d := range s {
		out[name] = d - earlier[name]
	}
	return out
}

// String lists the processes' CPU seconds in a fixed order.
func (s cpuSample) String() string {
	var parts []string
	for _, name := range []string{"kube-apiserver", "etcd", "manager", "bench"} {
		if d, ok := s[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f s", name, d.Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}

// processCPU is the user and system CPU time the process has used, 0 if it cannot be read.
func processCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces: count fields after it.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func processName(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			out = append(out, child)
		}
	}
	return out
}

// total is the CPU all the processes used.
func (s cpuSample) total() time.Duration {
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum
}

// perWrite is the API server's and etcd's CPU milliseconds per write.
func perWrite(s cpuSample, writes float64) float64 {
	if writes == 0 {
		return 0
	}
	return float64((s["kube-apiserver"] + s["etcd"]).Milliseconds()) / writes
}

// waitForAQuietAPIServer waits until the API server and etcd together use less than a
// tenth of a core for two seconds in a row, at most a minute: installing a CRD makes the
// API server rebuild its OpenAPI documents for seconds, which would be measured as the
// yardstick's cost otherwise. It returns how long it waited.
func waitForAQuietAPIServer() time.Duration {
	const quiet, window = 100 * time.Millisecond, time.Second
	start := time.Now()
	calm := 0
	for calm < 2 && time.Since(start) < time.Minute {
		before := sampleCPU(0)
		time.Sleep(window)
		used := sampleCPU(0).since(before)
		if used["kube-apiserver"]+used["etcd"] < quiet {
			calm++
		} else {
			calm = 0
		}
	}
	return time.Since(start)
}
