package callercred

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count token lookups and exchanges by remote (the exchanger's Options.Name:
// an import or its URL), never by caller or token, so that callers cannot grow the
// series and no credential reaches a label.
type Metrics struct {
	lookups   *prometheus.CounterVec
	exchanges *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	cached    prometheus.Gauge
	evictions prometheus.Counter
	fetches   *prometheus.CounterVec
}

// NewMetrics returns the metrics, to be registered with Collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cantus_adapter_caller_token_lookups_total",
			Help: "Exchanged caller tokens looked up in the cache, by remote and result (hit, miss).",
		}, []string{"remote", "result"}),
		exchanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cantus_adapter_caller_token_exchanges_total",
			Help: "RFC 8693 token exchanges made for callers, by remote and outcome (succeeded, failed).",
		}, []string{"remote", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cantus_adapter_caller_token_exchange_duration_seconds",
			Help:    "Time of a token exchange (a cache miss), by remote.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10), // 1ms .. ~4s
		}, []string{"remote"}),
		cached: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cantus_adapter_caller_tokens_cached",
			Help: "Exchanged caller tokens held in the cache.",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cantus_adapter_caller_token_evictions_total",
			Help: "Exchanged caller tokens dropped from the full cache to make room for others.",
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cantus_adapter_caller_connect_fetches_total",
			Help: "Connected callers' tokens asked of the operator, by remote and outcome (token, connect_required, failed).",
		}, []string{"remote", "outcome"}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lookups, m.exchanges, m.duration, m.cached, m.evictions, m.fetches}
}

// lookupSeries are one remote's cache lookups (hits, misses), for an Exchanger and a
// Connector alike.
type lookupSeries struct {
	hits, misses prometheus.Counter
}

func (m *Metrics) lookupSeries(remote string) *lookupSeries {
	if m == nil {
		return nil
	}
	return &lookupSeries{
		hits:   m.lookups.WithLabelValues(remote, "hit"),
		misses: m.lookups.WithLabelValues(remote, "miss"),
	}
}

func (s *lookupSeries) hit() {
	if s != nil {
		s.hits.Inc()
	}
}

func (s *lookupSeries) miss() {
	if s != nil {
		s.misses.Inc()
	}
}

// series are one remote's exchanges, looked up once per exchanger rather than per call.
type series struct {
	succeeded, failed prometheus.Counter
	duration          prometheus.Observer
}

func (m *Metrics) series(remote string) *series {
	if m == nil {
		return nil
	}
	return &series{
		succeeded: m.exchanges.WithLabelValues(remote, "succeeded"),
		failed:    m.exchanges.WithLabelValues(remote, "failed"),
		duration:  m.duration.WithLabelValues(remote),
	}
}

func (m *Metrics) setCached(n int) {
	if m != nil {
		m.cached.Set(float64(n))
	}
}

func (m *Metrics) evicted() {
	if m != nil {
		m.evictions.Inc()
	}
}

func (s *series) exchanged(ok bool, seconds float64) {
	if s == nil {
		return
	}
	s.duration.Observe(seconds)
	if ok {
		s.succeeded.Inc()
	} else {
		s.failed.Inc()
	}
}

// connectSeries are one connect-mode remote's fetches from the operator by outcome.
type connectSeries struct {
	tokens, required, failed prometheus.Counter
}

func (m *Metrics) connectSeries(remote string) *connectSeries {
	if m == nil {
		return nil
	}
	return &connectSeries{
		tokens:   m.fetches.WithLabelValues(remote, "token"),
		required: m.fetches.WithLabelValues(remote, "connect_required"),
		failed:   m.fetches.WithLabelValues(remote, "failed"),
	}
}

// fetched counts one fetch by its outcome.
func (s *connectSeries) fetched(err error) {
	if s == nil {
		return
	}
	var required *ConnectRequired
	switch {
	case err == nil:
		s.tokens.Inc()
	case errors.As(err, &required):
		s.required.Inc()
	default:
		s.failed.Inc()
	}
}
