package controller

import (
	"errors"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

func TestStatusSetters(t *testing.T) {
	available := workload.Observation{URL: "http://x/mcp", Available: true, Reason: cantusv1alpha1.ReasonAvailable, Message: "1 of 1 adapter pods ready", ReadyReplicas: 1, Replicas: 1}
	notReady := workload.Observation{URL: "http://x/mcp", Reason: cantusv1alpha1.ReasonDeploymentNotReady, Message: "0 of 1 adapter pods ready", Replicas: 1}
	cases := []struct {
		name       string
		set        func(ss *cantusv1alpha1.SkillServer)
		wantReady  metav1.ConditionStatus
		wantReason string
		wantConds  map[string]metav1.ConditionStatus
	}{
		{
			name:       "available workload makes Ready true",
			set:        func(ss *cantusv1alpha1.SkillServer) { setObserved(ss, available, "h", nil) },
			wantReady:  metav1.ConditionTrue,
			wantReason: cantusv1alpha1.ReasonReconciled,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionAvailable: metav1.ConditionTrue},
		},
		{
			name:       "unready pods carry their reason into Ready",
			set:        func(ss *cantusv1alpha1.SkillServer) { setObserved(ss, notReady, "h", nil) },
			wantReady:  metav1.ConditionFalse,
			wantReason: cantusv1alpha1.ReasonDeploymentNotReady,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionAvailable: metav1.ConditionFalse},
		},
		{
			name:       "stalled spec",
			set:        func(ss *cantusv1alpha1.SkillServer) { setStalled(ss, errors.New("tool x: bad template")) },
			wantReady:  metav1.ConditionFalse,
			wantReason: cantusv1alpha1.ReasonInvalidSpec,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionStalled: metav1.ConditionTrue},
		},
		{
			name: "a fixed spec clears Stalled",
			set: func(ss *cantusv1alpha1.SkillServer) {
				setStalled(ss, errors.New("bad"))
				clearStalled(ss)
				setObserved(ss, available, "h", nil)
			},
			wantReady:  metav1.ConditionTrue,
			wantReason: cantusv1alpha1.ReasonReconciled,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionStalled: ""},
		},
		{
			name:       "apply failure",
			set:        func(ss *cantusv1alpha1.SkillServer) { setApplyFailed(ss, errors.New("forbidden")) },
			wantReady:  metav1.ConditionFalse,
			wantReason: cantusv1alpha1.ReasonApplyFailed,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionAvailable: metav1.ConditionFalse},
		},
		{
			name: "non-portable schema keys warn without changing Ready",
			set: func(ss *cantusv1alpha1.SkillServer) {
				setSchemaPortable(ss, []string{`skill "a": /title`})
				setObserved(ss, available, "h", nil)
			},
			wantReady:  metav1.ConditionTrue,
			wantReason: cantusv1alpha1.ReasonReconciled,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionSchemaPortable: metav1.ConditionFalse},
		},
		{
			name: "pods that serve the wrong tools are not Ready",
			set: func(ss *cantusv1alpha1.SkillServer) {
				setObserved(ss, available, "h", nil)
				setCondition(ss, cantusv1alpha1.ConditionVerified, metav1.ConditionFalse, cantusv1alpha1.ReasonToolsMismatch, "missing: a")
			},
			wantReady:  metav1.ConditionFalse,
			wantReason: cantusv1alpha1.ReasonToolsMismatch,
			wantConds:  map[string]metav1.ConditionStatus{cantusv1alpha1.ConditionAvailable: metav1.ConditionTrue},
		},
		{
			name: "available pods not verified yet are not Ready",
			set: func(ss *cantusv1alpha1.SkillServer) {
				setObserved(ss, available, "h", nil)
				setCondition(ss, cantusv1alpha1.ConditionVerified, metav1.ConditionUnknown, cantusv1alpha1.ReasonNotVerified, "later")
			},
			wantReady:  metav1.ConditionFalse,
			wantReason: cantusv1alpha1.ReasonNotVerified,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
			ss.Spec.Skills = []cantusv1alpha1.Skill{{Name: "a"}}
			tc.set(ss)
			summarizeSkillServerReady(ss)
			ready := kubekit.FindCondition(ss, cantusv1alpha1.ConditionReady)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason {
				t.Fatalf("Ready = %+v, want %s/%s", ready, tc.wantReady, tc.wantReason)
			}
			if ready.ObservedGeneration != 4 {
				t.Errorf("Ready.observedGeneration = %d, want 4", ready.ObservedGeneration)
			}
			for condType, want := range tc.wantConds {
				got := kubekit.FindCondition(ss, condType)
				switch {
				case want == "" && got != nil:
					t.Errorf("%s should be absent, got %+v", condType, got)
				case want != "" && (got == nil || got.Status != want):
					t.Errorf("%s = %+v, want %s", condType, got, want)
				}
			}
		})
	}
}

// A stateless gateway of several replicas whose imports relay requests says in
// ImportedToolsServable that only callers of 2026-07-28 are asked, naming the imports
// and the replicas; one of one replica (which routes older callers' answers itself), a
// stateful one, or one that relays nothing, says nothing of it.
func TestImportedToolsServable_SaysAScaledOutStatelessGatewayAsksOnlyModernCallers(t *testing.T) {
	const note = "reaches only callers of protocol 2026-07-28: this server is stateless with 3 replicas"
	gateway := func(stateless bool, replicas int32, relay ...cantusv1alpha1.RelayedRequest) *cantusv1alpha1.SkillServer {
		ss := &cantusv1alpha1.SkillServer{}
		ss.Spec.Stateless = &stateless
		ss.Spec.Replicas = &replicas
		ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "plain"}, {Name: "asking", Relay: relay}}
		return ss
	}
	for _, tc := range []struct {
		name string
		ss   *cantusv1alpha1.SkillServer
		want bool
	}{
		{"stateless, 3 replicas, relaying", gateway(true, 3, cantusv1alpha1.RelayElicitation), true},
		{"stateless, 1 replica, relaying", gateway(true, 1, cantusv1alpha1.RelayElicitation), false},
		{"stateful, relaying", gateway(false, 1, cantusv1alpha1.RelayElicitation), false},
		{"stateless, 3 replicas, relaying nothing", gateway(true, 3), false},
	} {
		setImportsResolved(tc.ss, render.Imports{})
		c := apimeta.FindStatusCondition(tc.ss.Status.Conditions, cantusv1alpha1.ConditionImportedToolsServable)
		if c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("%s: ImportedToolsServable %+v, want True", tc.name, c)
		}
		if got := strings.Contains(c.Message, note) && strings.Contains(c.Message, "asking") && !strings.Contains(c.Message, "plain"); got != tc.want {
			t.Errorf("%s: message %q; want the note naming the relaying import: %v", tc.name, c.Message, tc.want)
		}
	}
}
