package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// A child name held by someone else's object is a NameConflict, and that object is left
// exactly as it was (issue 23, finding 2): before, server-side apply with forced ownership
// took over an admin's NetworkPolicy or another app's Service, pointed it at the tenant's
// pods and gave it an owner reference, so deleting the SkillServer deleted it.
func TestChildNamesTakenBySomeoneElseAreNotAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	adminPolicy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-deny"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	otherService := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "payments"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	g.Expect(k8sClient.Create(ctx, adminPolicy)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, otherService)).To(Succeed())
	startManager(t, workload.NewKubernetes(nil, "example.com/cantus:test", "cluster.local"))

	denying := newSkillServer(ns, "default-deny", templateSkill("search_book", "found {{ .title }}"))
	denying.Spec.AllowFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "agent"}}}}
	paying := newSkillServer(ns, "payments", templateSkill("search_book", "found {{ .title }}"))
	g.Expect(k8sClient.Create(ctx, denying)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, paying)).To(Succeed())

	for _, tc := range []struct{ name, kind string }{{"default-deny", "NetworkPolicy"}, {"payments", "Service"}} {
		g.Eventually(getSkillServer(ctx, ns, tc.name), 30*time.Second).Should(
			haveCondition(cantusv1alpha1.ConditionStalled, metav1.ConditionTrue, cantusv1alpha1.ReasonNameConflict))
		got, err := getSkillServer(ctx, ns, tc.name)()
		g.Expect(err).NotTo(HaveOccurred())
		ready := findCondition(got, cantusv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring(tc.kind + " " + ns + "/" + tc.name + " already exists and is not controlled by this object"))
	}

	// Both objects are as their owners left them, a while after the conflicts.
	time.Sleep(2 * time.Second)
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(adminPolicy), policy)).To(Succeed())
	g.Expect(policy.OwnerReferences).To(BeEmpty())
	g.Expect(policy.Spec.Ingress).To(BeEmpty(), "the admin's deny-all policy gained ingress rules")
	g.Expect(policy.ResourceVersion).To(Equal(adminPolicy.ResourceVersion))
	service := &corev1.Service{}
	g.Expect(k8sClient.Get(ctx, crclient.ObjectKeyFromObject(otherService), service)).To(Succeed())
	g.Expect(service.OwnerReferences).To(BeEmpty())
	g.Expect(service.Spec.Selector).To(Equal(map[string]string{"app": "payments"}))
	g.Expect(service.ResourceVersion).To(Equal(otherService.ResourceVersion))
}
