package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// checkTokenEndpoint holds the token endpoint of a token exchange to the policy the
// remote is held to, and to https away from loopback: gateways send callers' tokens and
// their client credential there. A refusal refuses the import, naming the endpoint;
// an allowed endpoint's checked addresses are kept in the decision for the status.
func checkTokenEndpoint(ctx context.Context, checker *policy.Checker, imp *cantusv1alpha1.RemoteToolImport, allowed policy.Decision) policy.Decision {
	cc := imp.Spec.CallerCredentials
	if cc == nil || cc.TokenExchange == nil {
		return allowed
	}
	d := checker.CheckTokenEndpoint(ctx, cc.TokenExchange.TokenEndpoint)
	if !d.Allowed {
		return policy.Decision{Reason: cantusv1alpha1.ReasonTokenEndpointNotAllowed, Message: fmt.Sprintf(
			"spec.callerCredentials.tokenExchange.tokenEndpoint is not allowed (%s): %s", d.Reason, d.Message)}
	}
	allowed.TokenEndpointAddresses = d.Addresses
	return allowed
}

// recordCallerCredentials sets status.callerCredentials at a probe: the mode, that the
// token endpoint passed the policy, and how many per-caller Secrets there are. Counted
// from the cache's metadata (no values); like the rest of the status it is written only
// when it changed.
func (r *RemoteToolImportReconciler) recordCallerCredentials(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, d policy.Decision) error {
	cc := imp.Spec.CallerCredentials
	if cc == nil {
		imp.Status.CallerCredentials = nil
		return nil
	}
	count := 0
	if cc.PerCallerSecret != nil {
		secrets := &metav1.PartialObjectMetadataList{}
		secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		reader := r.MetadataReader
		if reader == nil {
			reader = r.Client
		}
		if err := reader.List(ctx, secrets, client.InNamespace(imp.Namespace),
			client.MatchingLabels{cantusv1alpha1.LabelCallerCredentialsFor: imp.Name}); err != nil {
			return fmt.Errorf("count the per-caller Secrets: %w", err)
		}
		for _, s := range secrets.Items {
			if s.Annotations[cantusv1alpha1.AnnotationCaller] != "" {
				count++
			}
		}
	}
	setCallerCredentialsStatus(imp, &d, int32(min(count, 1<<30)))
	return nil
}

// setCallerCredentialsStatus records the mode, and what the policy check d (nil: none
// passed) found of the token endpoint.
func setCallerCredentialsStatus(imp *cantusv1alpha1.RemoteToolImport, d *policy.Decision, callerSecrets int32) {
	cc := imp.Spec.CallerCredentials
	if cc == nil {
		imp.Status.CallerCredentials = nil
		return
	}
	status := &cantusv1alpha1.CallerCredentialsStatus{Mode: cc.Mode(), CallerSecrets: callerSecrets}
	if cc.TokenExchange != nil && d != nil {
		status.TokenEndpointChecked = true
		status.TokenEndpointAddresses = checkedAddresses(policy.Decision{Addresses: d.TokenEndpointAddresses})
	}
	imp.Status.CallerCredentials = status
}

// checkClientCredential makes sure the Secrets of the token exchange's client credential
// hold their keys, as the gateway's pods will mount them; the value is not kept.
func (r *RemoteToolImportReconciler) checkClientCredential(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) error {
	cc := imp.Spec.CallerCredentials
	if cc == nil || cc.TokenExchange == nil {
		return nil
	}
	refs := []struct {
		field string
		ref   *cantusv1alpha1.SecretKeyRef
	}{{"clientSecret", cc.TokenExchange.ClientSecret}, {"privateKey", cc.TokenExchange.PrivateKey}}
	for _, r2 := range refs {
		if r2.ref == nil {
			continue
		}
		if _, err := secretValue(ctx, r.Client, imp.Namespace, *r2.ref); err != nil {
			return fmt.Errorf("spec.callerCredentials.tokenExchange.%s: %w", r2.field, err)
		}
	}
	return nil
}

// clientCredentialRefs are the Secrets of the token exchange's client credential.
func clientCredentialRefs(imp *cantusv1alpha1.RemoteToolImport) []string {
	cc := imp.Spec.CallerCredentials
	if cc == nil || cc.TokenExchange == nil {
		return nil
	}
	var names []string
	for _, ref := range []*cantusv1alpha1.SecretKeyRef{cc.TokenExchange.ClientSecret, cc.TokenExchange.PrivateKey} {
		if ref != nil {
			names = append(names, ref.Name)
		}
	}
	return names
}
