package render

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The adapter cannot import the API (it stays free of k8s.io), so the limits it applies
// when a config leaves them unset are the contract's constants; this holds them to the
// API's defaults and to the pool sizes spec.limits' documentation names, which users
// read in kubectl explain.
func TestAdapterLimitsAreTheAPIDefaults(t *testing.T) {
	if cantusv1alpha1.DefaultConcurrentCalls != adapterconfig.DefaultConcurrentCalls ||
		cantusv1alpha1.DefaultQueueLength != adapterconfig.DefaultQueueLength ||
		cantusv1alpha1.DefaultQueueWait != adapterconfig.DefaultQueueWait {
		t.Errorf("API limits %d calls, %d queued, %s wait; the adapter's %d, %d, %s",
			cantusv1alpha1.DefaultConcurrentCalls, cantusv1alpha1.DefaultQueueLength, cantusv1alpha1.DefaultQueueWait,
			adapterconfig.DefaultConcurrentCalls, adapterconfig.DefaultQueueLength, adapterconfig.DefaultQueueWait)
	}
	crd, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "cantus.dev_skillservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(crd)), " ")
	for _, want := range []string{
		"subscriptions/listen streams (" + strconv.Itoa(adapterconfig.MaxListenStreams) + ")",
		"answers (" + strconv.Itoa(adapterconfig.MaxRelayWaitingCalls) + ")",
		"remotes (" + strconv.Itoa(adapterconfig.MaxRemoteSubscriptions) + ")",
		"Unset: " + strconv.Itoa(int(adapterconfig.DefaultCallerShare*100)) + ".",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("spec.limits.callerSharePercent's documentation does not say %q, as the adapter does", want)
		}
	}
}
