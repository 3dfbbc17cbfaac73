package adapter

import (
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
)

// toolMetrics live on a registry of their own: the local runtime runs several
// adapters in one process, and the default registry would make them collide.
type toolMetrics struct {
	registry *prometheus.Registry
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// refusals counts calls the authorization rules refused; by tool only, never by
	// caller, so that callers cannot grow the series without bound.
	refusals *prometheus.CounterVec
	// rejected counts the calls refused by the call limits, by reason (rate_limited,
	// queue_full, queue_wait, cancelled).
	rejected *prometheus.CounterVec
	// gateway counts the connects and retries per remote of re-exported tools.
	gateway *gateway.Metrics
	// openStreams counts the long-lived streams, which carry
	// notifications/tools/list_changed to sessions.
	openStreams prometheus.Gauge
	// imageSkillsLeftOut counts the image skills the current config does not serve.
	imageSkillsLeftOut prometheus.Gauge

	// series caches each tracked tool's children of calls, errors and duration, so a
	// call does not look them up by label; copy on write, under seriesMu.
	series   atomic.Pointer[map[string]*toolSeries]
	seriesMu sync.Mutex
}

// toolSeries are one tool's children of the per-tool metrics.
type toolSeries struct {
	calls, errors prometheus.Counter
	duration      prometheus.Observer
}

func (m *toolMetrics) seriesOf(tool string) *toolSeries {
	return &toolSeries{
		calls:    m.calls.WithLabelValues(tool),
		errors:   m.errors.WithLabelValues(tool),
		duration: m.duration.WithLabelValues(tool),
	}
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
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cantus_adapter_tool_refusals_total",
		Help: "Tool calls refused because the caller may not call the tool, by tool.",
	}, []string{"tool"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cantus_adapter_rejected_calls_total",
		Help: "Tool calls refused by this pod's call limits, by reason: rate_limited (HTTP 429, the caller's rate), queue_full, queue_wait and cancelled (server_busy).",
	}, []string{"reason"})
	for _, reason := range []string{admission.RejectedRateLimited, admission.RejectedQueueFull, admission.RejectedQueueWait, admission.RejectedCancelled} {
		m.rejected.WithLabelValues(reason)
	}
	m.gateway = gateway.NewMetrics()
	m.openStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cantus_adapter_open_streams",
		Help: "Long-lived streams open now (GET /mcp, GET /sse, subscriptions/listen): the sessions that hear notifications.",
	})
	m.imageSkillsLeftOut = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cantus_adapter_image_skills_left_out",
		Help: "Agent skills from image volumes that the current config does not serve, because they break an Agent Skills rule or a limit (the log says which and why).",
	})
	m.registry.MustRegister(m.calls, m.errors, m.duration, m.refusals, m.rejected, m.openStreams, m.imageSkillsLeftOut)
	m.registry.MustRegister(m.gateway.Collectors()...)
	m.trackTools(toolNames)
	return m
}

// trackTools creates the series of tools, so a rate() over a quiet tool reads 0, not
// absent.
func (m *toolMetrics) trackTools(toolNames []string) {
	m.updateSeries(func(series map[string]*toolSeries) {
		for _, name := range toolNames {
			series[name] = m.seriesOf(name)
		}
	})
}

// updateSeries changes a copy of the tools' series and publishes it: calls read the
// map without a lock, so it is never changed in place.
func (m *toolMetrics) updateSeries(change func(series map[string]*toolSeries)) {
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	next := map[string]*toolSeries{}
	if cur := m.series.Load(); cur != nil {
		next = maps.Clone(*cur)
	}
	change(next)
	m.series.Store(&next)
}

// forgetTools drops the series of tools no longer served.
func (m *toolMetrics) forgetTools(toolNames []string) {
	if len(toolNames) == 0 {
		return
	}
	m.updateSeries(func(series map[string]*toolSeries) {
		for _, name := range toolNames {
			delete(series, name)
			m.calls.DeleteLabelValues(name)
			m.errors.DeleteLabelValues(name)
			m.duration.DeleteLabelValues(name)
			m.refusals.DeleteLabelValues(name)
		}
	})
}

func (m *toolMetrics) observeCall(tool string, failed bool, took time.Duration) {
	var ts *toolSeries
	if cur := m.series.Load(); cur != nil {
		ts = (*cur)[tool]
	}
	if ts == nil {
		// Not tracked (a call that raced a reload removing its tool): by label.
		m.calls.WithLabelValues(tool).Inc()
		if failed {
			m.errors.WithLabelValues(tool).Inc()
		}
		m.duration.WithLabelValues(tool).Observe(took.Seconds())
		return
	}
	ts.calls.Inc()
	if failed {
		ts.errors.Inc()
	}
	ts.duration.Observe(took.Seconds())
}

// observeRefusal counts a refused call. Only served tools get here (mcp-go answers
// unknown names itself), so the label stays bounded.
func (m *toolMetrics) observeRefusal(tool string) {
	m.refusals.WithLabelValues(tool).Inc()
}

// observeRejection counts a call the limits refused.
func (m *toolMetrics) observeRejection(reason string) {
	m.rejected.WithLabelValues(reason).Inc()
}

func (m *toolMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}
