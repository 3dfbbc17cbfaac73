// Package gomemlimit gives the Go runtime a soft memory limit under the container's.
//
// Go's collector lets the heap grow to twice what is live before it runs (GOGC=100),
// so a manager holding 10,000 SkillServers and 10,000 imports (about 250 MB live) asked
// the kernel for 670 MB, and a pod with a memory limit is killed long before its heap
// is full. With a soft limit at 90% of the container's, the collector runs harder as the
// heap nears it instead.
package gomemlimit

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Ratio is the share of the container's memory limit the heap may use; the rest is for
// goroutine stacks, the runtime and what the collector has not returned yet.
const Ratio = 0.9

// FromContainer sets the soft memory limit from the cgroup's memory limit, unless
// GOMEMLIMIT is set, and returns it (math.MaxInt64 when there is no limit).
func FromContainer() (int64, error) {
	return memlimit.Set(
		memlimit.WithRatio(Ratio),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(slog.New(slog.DiscardHandler)),
	)
}
