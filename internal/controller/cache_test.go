package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// The manager's cache holds only the ConfigMaps the operator owns, without their managed
// fields; others (a tenant's CA bundle, anything else in the cluster) are read from the
// API server when needed.
func TestManagerCacheHoldsOnlyOwnedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := kubekit.NewNamespace(t, k8sClient)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine",
		Labels: map[string]string{workload.LabelManagedBy: workload.FieldOwner}}}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Data: map[string]string{"ca.crt": "x"}}
	g.Expect(k8sClient.Create(ctx, mine)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, theirs)).To(Succeed())

	mgr := newTestManager(t)
	kubekit.RunManager(t, mgr)
	g.Eventually(func() []string {
		list := &corev1.ConfigMapList{}
		_ = mgr.GetCache().List(ctx, list, crclient.InNamespace(ns))
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		return names
	}, 10*time.Second).Should(Equal([]string{"mine"}))
	fromAPI, cached := &corev1.ConfigMap{}, &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(mine), fromAPI)).To(Succeed())
	g.Expect(fromAPI.ManagedFields).NotTo(BeEmpty())
	g.Expect(mgr.GetCache().Get(ctx, crclient.ObjectKeyFromObject(mine), cached)).To(Succeed())
	g.Expect(cached.ManagedFields).To(BeEmpty(), "the cache drops managed fields")

	// The manager's client still reads an unowned ConfigMap and a Secret, from the API.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "s3cr3t"}}
	g.Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	g.Expect(mgr.GetClient().Get(ctx, crclient.ObjectKeyFromObject(theirs), &corev1.ConfigMap{})).To(Succeed())
	g.Expect(mgr.GetClient().Get(ctx, crclient.ObjectKeyFromObject(secret), &corev1.Secret{})).To(Succeed())
}
