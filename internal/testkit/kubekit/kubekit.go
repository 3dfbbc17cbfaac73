// Package kubekit holds the test helpers that speak to an API server (envtest's or a
// cluster's). It is apart from internal/testkit so that tests which link nothing of
// Kubernetes (the adapter's) can share the rest of the kit.
//
// Only tests import it (depguard refuses it in production code).
package kubekit

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
