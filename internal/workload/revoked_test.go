package workload

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testenv"
)

// A restarted operator recalls revocations only from the adapter configs it rendered:
// <name>-adapter ConfigMaps controlled by the SkillServer <name> as it exists. A tenant's
// ConfigMap with the operator's label, one controlled by a SkillServer that is gone (or
// by another of that name), or one not named after its SkillServer is ignored (issue 23,
// finding 6: any ConfigMap labelled managed-by=cantus-operator used to be read, so a
// tenant could revoke anyone's service account at the next restart).
func TestRevokedInConfigsReadsOnlyConfigsOfSkillServers(t *testing.T) {
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"a", "tenant"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	server := func(ns, name string) *cantusv1alpha1.SkillServer {
		ss := &cantusv1alpha1.SkillServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{
				Name: "echo", InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object"},
				Template: &cantusv1alpha1.TemplateBackend{Text: "ok"},
			}}},
		}
		if err := c.Create(ctx, ss); err != nil {
			t.Fatal(err)
		}
		return ss
	}
	dropped := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	config := func(ss *cantusv1alpha1.SkillServer, name string, pods, accounts []string, refuseBefore *time.Time) *corev1.ConfigMap {
		apply, err := configMapFor(ss, &adapterconfig.Config{Auth: &adapterconfig.AuthConfig{Issuers: []adapterconfig.Issuer{{
			Kind: adapterconfig.IssuerServiceAccount, URL: "https://kubernetes.default.svc", Audiences: []string{"a"},
			RevokedUIDs: pods, RevokedServiceAccountUIDs: accounts, RefuseIssuedBefore: refuseBefore,
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: name, Labels: apply.Labels},
			Data:       apply.Data,
		}
		if ss.UID != "" {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cantus.dev/v1alpha1", Kind: "SkillServer",
				Name: ss.Name, UID: ss.UID, Controller: ptr.To(true)}}
		}
		return cm
	}
	room, tenants := server("a", "room"), server("tenant", "mine")
	gone := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "gone", UID: "0b8f6f7e-0000-4000-8000-000000000000"}}
	for _, cm := range []*corev1.ConfigMap{
		config(room, "room-adapter", []string{"pod-2"}, []string{"account-1"}, &dropped),
		// Written by an operator from before the kinds were kept apart.
		config(tenants, "mine-adapter", []string{"pod-2", "account-old"}, nil, nil),
		// A tenant's forgeries.
		config(&cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "forged"}},
			"forged-adapter", nil, []string{"victim-by-label"}, nil),
		config(gone, "gone-adapter", nil, []string{"victim-by-gone-owner"}, nil),
		config(tenants, "other-adapter", nil, []string{"victim-by-wrong-name"}, nil),
		config(tenants, "mine-adapter-2", nil, []string{"victim-by-suffix"}, nil),
	} {
		if err := c.Create(ctx, cm); err != nil {
			t.Fatalf("create ConfigMap %s: %v", cm.Name, err)
		}
	}

	got, err := RevokedInConfigs(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"account-1"}; !slices.Equal(got.ServiceAccounts, want) {
		t.Errorf("service accounts recalled = %v, want %v", got.ServiceAccounts, want)
	}
	if want := []string{"account-old", "pod-2"}; !slices.Equal(got.Pods, want) {
		t.Errorf("pods recalled = %v, want %v", got.Pods, want)
	}
	if !got.RefuseIssuedBefore.Equal(dropped) {
		t.Errorf("RefuseIssuedBefore recalled = %v, want %v", got.RefuseIssuedBefore, dropped)
	}
}
