package controller

import (
	"errors"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// TestImportReadySummary checks that Ready follows from the conditions the setters
// record, through the one rule, on every path a reconcile can take.
func TestImportReadySummary(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	allowed := policy.Decision{Allowed: true, Reason: cantusv1alpha1.ReasonAllowed, Message: "listed"}
	succeed := func(imp *cantusv1alpha1.RemoteToolImport) {
		setSourceAllowed(imp, allowed)
		setHandshakeSucceeded(imp, &mcpclient.Result{ServerName: "remote", ServerVersion: "1.0", ProtocolVersion: "2025-06-18"},
			[]mcpclient.Tool{{Name: "a"}, {Name: "b"}}, now)
	}
	cases := []struct {
		name        string
		set         func(*cantusv1alpha1.RemoteToolImport)
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{
			name:       "nothing observed yet",
			set:        func(*cantusv1alpha1.RemoteToolImport) {},
			wantReady:  metav1.ConditionFalse,
			wantReason: cantusv1alpha1.ReasonProgressing,
		},
		{
			name:        "handshake succeeded",
			set:         succeed,
			wantReady:   metav1.ConditionTrue,
			wantReason:  cantusv1alpha1.ReasonHandshakeSucceeded,
			wantMessage: "2 tools from remote 1.0 (protocol 2025-06-18)",
		},
		{
			name: "source not allowed, after a success",
			set: func(imp *cantusv1alpha1.RemoteToolImport) {
				succeed(imp)
				d := policy.Decision{Reason: cantusv1alpha1.ReasonNoPolicy, Message: "create a ToolSourcePolicy"}
				setSourceAllowed(imp, d)
				setNotAllowed(imp, d)
			},
			wantReady:   metav1.ConditionFalse,
			wantReason:  cantusv1alpha1.ReasonNoPolicy,
			wantMessage: "create a ToolSourcePolicy",
		},
		{
			name: "a Secret missing keeps Ready False with its reason",
			set: func(imp *cantusv1alpha1.RemoteToolImport) {
				succeed(imp)
				setPrerequisiteMissing(imp, cantusv1alpha1.ReasonSecretNotFound, "secret x not found")
			},
			wantReady:   metav1.ConditionFalse,
			wantReason:  cantusv1alpha1.ReasonSecretNotFound,
			wantMessage: "secret x not found",
		},
		{
			name: "handshake failed",
			set: func(imp *cantusv1alpha1.RemoteToolImport) {
				setSourceAllowed(imp, allowed)
				setHandshakeFailed(imp, &mcpclient.Error{Reason: "ConnectionRefused", Detail: "refused"}, now)
			},
			wantReady:  metav1.ConditionFalse,
			wantReason: "ConnectionRefused",
		},
		{
			name: "an unclassified failure",
			set: func(imp *cantusv1alpha1.RemoteToolImport) {
				setSourceAllowed(imp, allowed)
				setHandshakeFailed(imp, errors.New("boom"), now)
			},
			wantReady:   metav1.ConditionFalse,
			wantReason:  "HandshakeFailed",
			wantMessage: "mcp_handshake_failed: boom",
		},
		{
			name: "stalled wins over an earlier success",
			set: func(imp *cantusv1alpha1.RemoteToolImport) {
				succeed(imp)
				setImportStalled(imp, "spec.url is empty")
			},
			wantReady:   metav1.ConditionFalse,
			wantReason:  cantusv1alpha1.ReasonInvalidSpec,
			wantMessage: "the spec cannot work, fix it and re-apply: spec.url is empty",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			imp := &cantusv1alpha1.RemoteToolImport{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			tc.set(imp)
			summarizeImportReady(imp)
			ready := apimeta.FindStatusCondition(imp.Status.Conditions, cantusv1alpha1.ConditionReady)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason {
				t.Fatalf("Ready = %+v, want %s/%s", ready, tc.wantReady, tc.wantReason)
			}
			if tc.wantMessage != "" && ready.Message != tc.wantMessage {
				t.Errorf("Ready.message = %q, want %q", ready.Message, tc.wantMessage)
			}
			if ready.ObservedGeneration != 3 {
				t.Errorf("Ready.observedGeneration = %d, want 3", ready.ObservedGeneration)
			}
		})
	}
}
