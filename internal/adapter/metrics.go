package adapter

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// toolMetrics live on a registry of their own: the local runtime runs several
// adapters in one process, and the default registry would make them collide.
type toolMetrics struct {
	registry *prometheus.Registry
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newToolMetrics(toolNames []string) *toolMetrics {
	m := &toolMetrics{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cantus_adapter_tool_calls_total",
			Help: "Tool calls received, by tool.",
		}, []string{"tool"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cantus_adapter_tool_errors_total",
			Help: "Tool calls that returned an error result (including invalid arguments), by tool.",
		}, []string{"tool"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cantus_adapter_tool_call_duration_seconds",
			Help:    "Time to answer a tool call, by tool.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12), // 1ms .. ~60s
		}, []string{"tool"}),
	}
	m.registry.MustRegister(m.calls, m.errors, m.duration)
	// Series exist from the start, so a rate() over a quiet tool reads 0, not absent.
	for _, name := range toolNames {
		m.calls.WithLabelValues(name)
		m.errors.WithLabelValues(name)
		m.duration.WithLabelValues(name)
	}
	return m
}

func (m *toolMetrics) observeCall(tool string, failed bool, took time.Duration) {
	m.calls.WithLabelValues(tool).Inc()
	if failed {
		m.errors.WithLabelValues(tool).Inc()
	}
	m.duration.WithLabelValues(tool).Observe(took.Seconds())
}

func (m *toolMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}
