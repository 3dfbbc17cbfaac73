package render

import (
	"fmt"
	"time"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// renderLimits renders spec.limits for the adapter; nil leaves the adapter's defaults
// (which are the API's), so that a server without limits keeps the config it had.
func renderLimits(spec *cantusv1alpha1.CallLimits) (*adapterconfig.Limits, error) {
	if spec == nil {
		return nil, nil
	}
	l := spec.Effective()
	wait, err := l.QueueWait.Bounded(time.Millisecond, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("spec.limits.queueWait: %w", err)
	}
	out := &adapterconfig.Limits{
		ConcurrentCalls: int(*l.ConcurrentCalls),
		QueueLength:     int(*l.QueueLength),
		QueueWait:       adapterconfig.Duration{Duration: wait},
	}
	if out.ConcurrentCalls < 1 || out.QueueLength < 0 {
		return nil, fmt.Errorf("spec.limits: concurrentCalls must be at least 1 and queueLength at least 0")
	}
	if p := l.CallerSharePercent; p != nil {
		if *p < 1 || *p > 100 {
			return nil, fmt.Errorf("spec.limits.callerSharePercent must be between 1 and 100")
		}
		out.CallerShare = float64(*p) / 100
	}
	if r := l.PerCaller; r != nil {
		if r.CallsPerSecond < 1 || *r.Burst < 1 {
			return nil, fmt.Errorf("spec.limits.perCaller: callsPerSecond and burst must be at least 1")
		}
		out.PerCaller = &adapterconfig.CallerRate{CallsPerSecond: float64(r.CallsPerSecond), Burst: int(*r.Burst)}
	}
	return out, nil
}
