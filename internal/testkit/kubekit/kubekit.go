// Package kubekit holds the test helpers that speak to an API server (envtest's or a
// cluster's): the objects the tests start from (objects.go), reading what the
// controllers wrote (status.go), and the remotes imports point at (remotes.go). The
// controller's tests and the integration tests share them. It is apart from
// internal/testkit so that tests which link nothing of Kubernetes (the adapter's) can
// share the rest of the kit.
//
// Only tests import it (depguard refuses it in production code).
package kubekit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// namespaceTimeout bounds the create and the delete of a namespace.
const namespaceTimeout = 30 * time.Second

// NewNamespace creates a namespace with a unique name ("test-" and a suffix the API
// server picks), so tests never see each other's objects, and deletes it when the test
// ends. envtest runs no namespace controller, so the namespace stays Terminating there;
// it is deleted all the same, so that a test on a real cluster leaves nothing behind.
func NewNamespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	ctx, cancel := context.WithTimeout(context.Background(), namespaceTimeout)
	defer cancel()
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), namespaceTimeout)
		defer cancel()
		if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// ExpectNoValueInStatusOrEvents fails t when any of values shows in the status of a
// SkillServer or RemoteToolImport of namespace ns, or in an event there: the tests of
// caller credentials grep them for the exact tokens and secrets they issued.
func ExpectNoValueInStatusOrEvents(t testing.TB, c client.Client, ns string, values ...string) {
	t.Helper()
	ctx := context.Background()
	var servers cantusv1alpha1.SkillServerList
	var imports cantusv1alpha1.RemoteToolImportList
	var events eventsv1.EventList
	var legacy corev1.EventList
	for _, list := range []client.ObjectList{&servers, &imports, &events, &legacy} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	var statuses []any
	for _, s := range servers.Items {
		statuses = append(statuses, s.Status)
	}
	for _, i := range imports.Items {
		statuses = append(statuses, i.Status)
	}
	data, err := json.Marshal([]any{statuses, events.Items, legacy.Items})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if strings.Contains(string(data), v) {
			t.Errorf("the value %q shows in a status or an event", v)
		}
	}
}

// AllowLoopback creates a ToolSourcePolicy that lets namespace ns reach 127.0.0.1, and
// deletes it when the test ends.
func AllowLoopback(t testing.TB, c client.Client, ns string) *cantusv1alpha1.ToolSourcePolicy {
	t.Helper()
	p := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "loopback-"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Hosts:             []string{"127.0.0.1"},
		},
	}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	return p
}

// SecretData reads the Secret ns/name's data as strings, for Eventually.
func SecretData(ctx context.Context, c client.Client, ns, name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
}

// RequestReconcile annotates obj as `kubectl annotate --overwrite ...
// cantus.dev/requestedAt=VALUE` does.
func RequestReconcile(t testing.TB, ctx context.Context, c client.Client, obj client.Object, value string) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[cantusv1alpha1.ReconcileRequestAnnotation] = value
	obj.SetAnnotations(annotations)
	if err := c.Patch(ctx, obj, patch); err != nil {
		t.Fatalf("annotate %s with %s=%s: %v", obj.GetName(), cantusv1alpha1.ReconcileRequestAnnotation, value, err)
	}
}

// RunManager runs mgr until the test ends, and fails the test when mgr ends in an
// error.
func RunManager(t testing.TB, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
