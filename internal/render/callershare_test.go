package render

import (
	"testing"

	"k8s.io/utils/ptr"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// spec.limits.callerSharePercent reaches the adapter as a fraction; unset, the adapter
// keeps its default (a quarter).
func TestCallerSharePercentReachesTheAdapter(t *testing.T) {
	out, err := renderLimits(&cantusv1alpha1.CallLimits{CallerSharePercent: ptr.To(int32(10))})
	if err != nil || out.CallerShare != 0.1 {
		t.Errorf("callerSharePercent 10 rendered as %+v (%v), want callerShare 0.1", out, err)
	}
	out, err = renderLimits(&cantusv1alpha1.CallLimits{})
	if err != nil || out.CallerShare != 0 {
		t.Errorf("no callerSharePercent rendered as %+v (%v), want callerShare unset", out, err)
	}
	if _, err := renderLimits(&cantusv1alpha1.CallLimits{CallerSharePercent: ptr.To(int32(101))}); err == nil {
		t.Error("callerSharePercent 101 rendered, want a refusal")
	}
}
