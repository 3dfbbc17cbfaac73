package workload

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
)

// The bridge's Secret: created owned by the import with a random token, kept as it is
// on the next call, renewed when someone spoiled it, and never taken over when it is
// someone else's.
func TestEnsureBridgeToken(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cantusv1alpha1.AddToScheme(scheme)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "taken-bridge"}, Data: map[string][]byte{"token": []byte("theirs")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(foreign).Build()
	ctx := context.Background()
	imp := stdioImport("github", []string{"server"})

	token, err := EnsureBridgeToken(ctx, c, imp)
	if err != nil || len(token) != 43 {
		t.Fatalf("EnsureBridgeToken = %q, %v; want a 43-character token", token, err)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "github-bridge"}, secret); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(secret, imp) || secret.Labels[LabelManagedBy] != FieldOwner {
		t.Errorf("the Secret is not the import's: owners %v, labels %v", secret.OwnerReferences, secret.Labels)
	}
	if string(secret.Data[render.BridgeAuthorizationKey]) != "Bearer "+token || string(secret.Data[render.BridgeTokenKey]) != token {
		t.Errorf("Secret data keys %v do not hold the token and its header", secret.Data)
	}
	if again, err := EnsureBridgeToken(ctx, c, imp); err != nil || again != token {
		t.Errorf("the second call = %v; want the same token", err)
	}
	other, err := EnsureBridgeToken(ctx, c, stdioImport("other", []string{"server"}))
	if err != nil || other == token {
		t.Errorf("another import's bridge got the same token (%v)", err)
	}

	for _, spoil := range []map[string][]byte{
		{render.BridgeTokenKey: []byte(""), render.BridgeAuthorizationKey: []byte("Bearer ")},
		{render.BridgeTokenKey: []byte("short"), render.BridgeAuthorizationKey: []byte("Bearer short")},
		{render.BridgeTokenKey: []byte(token)}, // the header gone
	} {
		secret.Data = spoil
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		renewed, err := EnsureBridgeToken(ctx, c, imp)
		if err != nil || len(renewed) != 43 || renewed == token {
			t.Errorf("a spoiled Secret %v: %v; want a new token", spoil, err)
		}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "github-bridge"}, secret); err != nil {
			t.Fatal(err)
		}
		token = renewed
	}

	var conflict *NameConflictError
	if _, err := EnsureBridgeToken(ctx, c, stdioImport("taken", []string{"server"})); !errors.As(err, &conflict) {
		t.Errorf("a foreign Secret of the bridge's name: %v, want a NameConflictError", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "taken-bridge"}, foreign); err != nil || string(foreign.Data["token"]) != "theirs" || len(foreign.OwnerReferences) != 0 {
		t.Errorf("the foreign Secret was changed: %v %+v", err, foreign)
	}
}

// The bridge container reads its token from the Secret, never from the Deployment
// itself, and a new token rolls the pod.
func TestBridgeDeploymentReadsItsTokenFromTheSecret(t *testing.T) {
	k := NewKubernetes(nil, adapterImage, "cluster.local").Bridges()
	imp := stdioImport("github", []string{"server"})
	dep := renderedDeployment(t, k, imp)
	raw, _ := json.Marshal(dep)
	if strings.Contains(string(raw), testBridgeToken) {
		t.Fatal("the Deployment holds the token")
	}
	var env *corev1.EnvVar
	for i, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == stdioproxy.TokenEnv {
			env = &dep.Spec.Template.Spec.Containers[0].Env[i]
		}
	}
	if env == nil || env.Value != "" || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil ||
		env.ValueFrom.SecretKeyRef.Name != "github-bridge" || env.ValueFrom.SecretKeyRef.Key != render.BridgeTokenKey ||
		env.ValueFrom.SecretKeyRef.Optional != nil {
		t.Errorf("the bridge container's %s = %+v, want it from Secret github-bridge key %s, required", stdioproxy.TokenEnv, env, render.BridgeTokenKey)
	}
	ac, err := k.deploymentFor(imp, "Qq1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0X1")
	if err != nil {
		t.Fatal(err)
	}
	if ac.Spec.Template.Annotations[annotationTokenDigest] == dep.Spec.Template.Annotations[annotationTokenDigest] {
		t.Errorf("a new token leaves the pod template as it was: %v", ac.Spec.Template.Annotations)
	}
}

// Without importers or a known operator, the policy admits nobody: an ingress rule
// without peers would admit everyone.
func TestBridgeNetworkPolicyWithNobodyToAdmitAdmitsNobody(t *testing.T) {
	imp := stdioImport("github", []string{"server"})
	var np networkingv1.NetworkPolicy
	data, _ := json.Marshal(bridgeNetworkPolicyFor(imp, nil, nil))
	if err := json.Unmarshal(data, &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy %+v, want ingress denied to all", np.Spec)
	}
	if np.Spec.PodSelector.MatchLabels[LabelManagedBy] != FieldOwner {
		t.Errorf("the policy selects %v: the admission policy lets the operator select only its own pods", np.Spec.PodSelector.MatchLabels)
	}
}
