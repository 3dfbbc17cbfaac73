package kubekit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Reading what the controllers wrote: objects afresh for Eventually, their conditions,
// and matchers over them.

// GetSkillServer returns a function for Eventually that reads the SkillServer ns/name
// afresh.
func GetSkillServer(ctx context.Context, c client.Client, ns, name string) func() (*cantusv1alpha1.SkillServer, error) {
	return func() (*cantusv1alpha1.SkillServer, error) {
		ss := &cantusv1alpha1.SkillServer{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ss)
		return ss, err
	}
}

// GetImport returns a function for Eventually that reads the RemoteToolImport ns/name
// afresh.
func GetImport(ctx context.Context, c client.Client, ns, name string) func() (*cantusv1alpha1.RemoteToolImport, error) {
	return func() (*cantusv1alpha1.RemoteToolImport, error) {
		imp := &cantusv1alpha1.RemoteToolImport{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, imp)
		return imp, err
	}
}

// ReconcileRequest is the request that reconciles obj.
func ReconcileRequest(obj client.Object) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
}

// ReconcileImport creates the import unless it is stored already, reconciles it once
// with r, and returns it as stored.
func ReconcileImport(t testing.TB, c client.Client, r reconcile.Reconciler, imp *cantusv1alpha1.RemoteToolImport) *cantusv1alpha1.RemoteToolImport {
	t.Helper()
	ctx := context.Background()
	if imp.ResourceVersion == "" {
		if err := c.Create(ctx, imp); err != nil {
			t.Fatalf("create import: %v", err)
		}
	}
	if _, err := r.Reconcile(ctx, ReconcileRequest(imp)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := &cantusv1alpha1.RemoteToolImport{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(imp), got); err != nil {
		t.Fatalf("get import: %v", err)
	}
	return got
}

// FindCondition is the SkillServer's condition of type condType, nil when it has none.
func FindCondition(ss *cantusv1alpha1.SkillServer, condType string) *metav1.Condition {
	for i := range ss.Status.Conditions {
		if ss.Status.Conditions[i].Type == condType {
			return &ss.Status.Conditions[i]
		}
	}
	return nil
}

// ConditionMessage is the message of the SkillServer's condition of type condType, ""
// when it has none.
func ConditionMessage(ss *cantusv1alpha1.SkillServer, condType string) string {
	if c := FindCondition(ss, condType); c != nil {
		return c.Message
	}
	return ""
}

// StalledMessage is the message of the SkillServer's Stalled condition, "" when it has
// none.
func StalledMessage(ss *cantusv1alpha1.SkillServer) string {
	return ConditionMessage(ss, cantusv1alpha1.ConditionStalled)
}

// ImportCondition is the import's condition of type condType; one with the status
// "absent" when it has none.
func ImportCondition(imp *cantusv1alpha1.RemoteToolImport, condType string) metav1.Condition {
	for _, c := range imp.Status.Conditions {
		if c.Type == condType {
			return c
		}
	}
	return metav1.Condition{Type: condType, Status: "absent"}
}

// HaveCondition matches a SkillServer whose condition has the given status and reason.
func HaveCondition(condType string, s metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return gomega.WithTransform(func(ss *cantusv1alpha1.SkillServer) string {
		if c := FindCondition(ss, condType); c != nil {
			return fmt.Sprintf("%s/%s", c.Status, c.Reason)
		}
		return "absent"
	}, gomega.Equal(fmt.Sprintf("%s/%s", s, reason)))
}

// HaveImportCondition matches an import whose condition has the given status and
// reason.
func HaveImportCondition(condType string, s metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return gomega.WithTransform(func(imp *cantusv1alpha1.RemoteToolImport) string {
		c := ImportCondition(imp, condType)
		return fmt.Sprintf("%s/%s", c.Status, c.Reason)
	}, gomega.Equal(fmt.Sprintf("%s/%s", s, reason)))
}

// BeTerminal matches an error the reconciler marks terminal (reconcile.TerminalError): a
// spec that cannot work, logged once and not retried.
func BeTerminal() types.GomegaMatcher {
	return gomega.Satisfy(func(err error) bool { return errors.Is(err, reconcile.TerminalError(nil)) })
}

// KstatusOf computes what kstatus-based tools (Flux, Argo CD health, cli-utils) make of
// the stored object; it reads obj afresh first.
func KstatusOf(ctx context.Context, g gomega.Gomega, c client.Client, obj client.Object) status.Status {
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(gomega.Succeed())
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: data})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return res.Status
}

// WarningReasons returns a function for Eventually that lists the reasons of the
// Warning events about the object ns/name.
func WarningReasons(ctx context.Context, c client.Client, ns, name string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		_ = c.List(ctx, list, client.InNamespace(ns))
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}
