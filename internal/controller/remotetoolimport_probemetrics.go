package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// lastProbe is when each import was last probed, for dashboards and alerts: probe
// recency lives here rather than in the status, so that an unchanged remote costs no
// write (10,000 imports at a 5 min refresh would otherwise write 2,000 times a minute).
var lastProbe = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "cantus_remotetoolimport_last_probe_timestamp_seconds",
	Help: "Unix time of the last handshake attempt of a RemoteToolImport, by namespace, name and outcome.",
}, []string{"namespace", "name", "outcome"})

func init() { metrics.Registry.MustRegister(lastProbe) }

func recordProbe(imp *cantusv1alpha1.RemoteToolImport, outcome string, at time.Time) {
	lastProbe.WithLabelValues(imp.Namespace, imp.Name, outcome).Set(float64(at.Unix()))
}

// keepProbeTimesIfNothingElseChanged drops a status change that is only the probe
// times: the status then equals what is stored and no write is sent.
func keepProbeTimesIfNothingElseChanged(before, after *cantusv1alpha1.RemoteToolImport) {
	candidate := after.Status.DeepCopy()
	candidate.LastProbeTime, candidate.LastSuccessTime = before.Status.LastProbeTime, before.Status.LastSuccessTime
	if sameJSON(*candidate, before.Status) {
		after.Status = *candidate
	}
}
