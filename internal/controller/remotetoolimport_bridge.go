package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=cantus.dev,resources=skillservers,verbs=get;list;watch

// bridgeAccess is who may call the import's stdio bridge: whoever holds the token of the
// bridge's Secret (made here when it is missing), from the pods of the SkillServers that
// import it.
func (r *RemoteToolImportReconciler) bridgeAccess(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (workload.BridgeAccess, error) {
	token, err := workload.EnsureBridgeToken(ctx, r.Client, imp)
	if err != nil {
		return workload.BridgeAccess{}, err
	}
	servers, err := r.importingServers(ctx, imp)
	if err != nil {
		return workload.BridgeAccess{}, err
	}
	return workload.BridgeAccess{Token: token, SkillServers: servers}, nil
}

// importingServers names the SkillServers of the import's namespace whose spec imports it.
func (r *RemoteToolImportReconciler) importingServers(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) ([]string, error) {
	var servers cantusv1alpha1.SkillServerList
	// Read only: the cache's objects need no copy.
	if err := r.List(ctx, &servers, client.InNamespace(imp.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the SkillServers that may import %s: %w", imp.Name, err)
	}
	var names []string
	for i := range servers.Items {
		if slices.ContainsFunc(servers.Items[i].Spec.Imports, func(s cantusv1alpha1.SkillImport) bool { return s.Name == imp.Name }) {
			names = append(names, servers.Items[i].Name)
		}
	}
	return names, nil
}

// stdioImportsOf enqueues the stdio imports a SkillServer names, as it was and as it is
// (the handler maps both objects of an update): the bridge's NetworkPolicy admits exactly
// the importing servers' pods.
func (r *RemoteToolImportReconciler) stdioImportsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	ss, ok := obj.(*cantusv1alpha1.SkillServer)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, ref := range ss.Spec.Imports {
		key := types.NamespacedName{Namespace: ss.Namespace, Name: ref.Name}
		imp := &cantusv1alpha1.RemoteToolImport{}
		if err := r.Get(ctx, key, imp); err != nil {
			if client.IgnoreNotFound(err) != nil {
				ctrl.LoggerFrom(ctx).Error(err, "get an imported RemoteToolImport to admit its importers", "remoteToolImport", key.String())
			}
			continue
		}
		if imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// withBridgeToken is the handshake's headers with the bridge's token as Authorization,
// in place of any the spec names in another spelling.
func withBridgeToken(headers map[string]string, token string) map[string]string {
	out := make(map[string]string, len(headers)+1)
	for name, value := range headers {
		if !strings.EqualFold(name, "Authorization") {
			out[name] = value
		}
	}
	out["Authorization"] = "Bearer " + token
	return out
}

// bridgeSecretRef names the bridge's Secret for the Secret index, so that a deleted or
// changed token re-runs the import's reconcile (which writes a new one).
func bridgeSecretRef(imp *cantusv1alpha1.RemoteToolImport) []string {
	if imp.Spec.Transport != cantusv1alpha1.ImportTransportStdio {
		return nil
	}
	return []string{workload.BridgeName(imp)}
}

// bridgeReason is the Ready reason of a failed bridge step.
func bridgeReason(err error) string {
	if conflict := (*workload.NameConflictError)(nil); errors.As(err, &conflict) {
		return cantusv1alpha1.ReasonNameConflict
	}
	return cantusv1alpha1.ReasonBridgeNotReady
}
