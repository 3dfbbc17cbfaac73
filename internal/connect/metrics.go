package connect

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

var (
	accountsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cantus_connect_accounts",
		Help: "Connected accounts of a RemoteToolImport in connect mode, by state (connected, reconnect_needed), as of its last probe.",
	}, []string{"namespace", "import", "state"})
	failedRefreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cantus_connect_failed_refreshes_total",
		Help: "Refreshes of connected accounts that failed, by RemoteToolImport.",
	}, []string{"namespace", "import"})
	refusedSignIns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cantus_connect_refused_sign_ins_total",
		Help: "Connects of OIDC callers whose sign-in was refused, by RemoteToolImport and reason (other_subject: signed in as another user than the caller; else what failed in the ID token).",
	}, []string{"namespace", "import", "reason"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(accountsGauge, failedRefreshes, refusedSignIns)
}

func countFailedRefresh(imp *cantusv1alpha1.RemoteToolImport) {
	failedRefreshes.WithLabelValues(imp.Namespace, imp.Name).Inc()
	failedCounter(imp.Namespace + "/" + imp.Name).Add(1)
}

// failedByImport counts failed refreshes per import ("namespace/name") in this replica,
// for the import's status.
var failedByImport sync.Map // string -> *atomic.Int32

func failedCounter(ref string) *atomic.Int32 {
	c, _ := failedByImport.LoadOrStore(ref, new(atomic.Int32))
	return c.(*atomic.Int32)
}
