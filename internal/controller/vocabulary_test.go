package controller

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Every failure code the MCP client can give has a reason of the API's own, so a new
// code cannot reach a condition verbatim.
func TestEveryHandshakeFailureHasAnAPIReason(t *testing.T) {
	for _, code := range mcpclient.Reasons {
		if _, ok := handshakeReasons[code]; !ok {
			t.Errorf("the MCP client's failure code %q has no API reason in handshakeReasons", code)
		}
	}
	if got := handshakeReason("SomethingNew"); got != cantusv1alpha1.ReasonHandshakeFailed {
		t.Errorf("an unknown code maps to %q, want %q", got, cantusv1alpha1.ReasonHandshakeFailed)
	}
	reason, _ := handshakeFailure(&mcpclient.Error{Reason: mcpclient.ReasonTLSError, Detail: "x"})
	if reason != cantusv1alpha1.ReasonTLSError {
		t.Errorf("a TLS failure gives reason %q, want %q", reason, cantusv1alpha1.ReasonTLSError)
	}
}

func stalledImport(reason, message string) *cantusv1alpha1.RemoteToolImport {
	imp := &cantusv1alpha1.RemoteToolImport{}
	if reason != "" {
		imp.Status.Conditions = []metav1.Condition{{Type: cantusv1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
			Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(time.Unix(1, 0))}}
	}
	return imp
}

// A spec that cannot work is a terminal error once, when it is found, and not at every
// later event of the same generation; a reconcile that asks to run again keeps its result.
func TestStalledIsATerminalErrorOncePerChange(t *testing.T) {
	fresh, stalled := stalledImport("", ""), stalledImport(cantusv1alpha1.ReasonInvalidSpec, "spec.url is empty")
	err := stalledAsTerminal(fresh, stalled, ctrl.Result{}, nil)
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("newly stalled: got %v, want a reconcile.TerminalError", err)
	}
	if err := stalledAsTerminal(stalled, stalledImport(cantusv1alpha1.ReasonInvalidSpec, "spec.url is empty"), ctrl.Result{}, nil); err != nil {
		t.Errorf("stalled as before: got %v, want nil (logged once per change)", err)
	}
	if err := stalledAsTerminal(stalled, stalledImport(cantusv1alpha1.ReasonInvalidSpec, "spec.url is not a URL"), ctrl.Result{}, nil); !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("stalled for a new reason: got %v, want a reconcile.TerminalError", err)
	}
	if err := stalledAsTerminal(fresh, stalled, ctrl.Result{RequeueAfter: time.Minute}, nil); err != nil {
		t.Errorf("a recheck was asked: got %v, want nil so that the requeue is kept", err)
	}
	if err := stalledAsTerminal(fresh, fresh, ctrl.Result{}, nil); err != nil {
		t.Errorf("not stalled: got %v, want nil", err)
	}
	failed := errors.New("api server down")
	if err := stalledAsTerminal(fresh, stalled, ctrl.Result{}, failed); !errors.Is(err, failed) || errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("a failed reconcile: got %v, want the failure itself, retried", err)
	}
}
