package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/saissuer"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// SkillServerReconciler runs an MCP adapter for every SkillServer through a workload
// runtime and reports what it observes in the status.
type SkillServerReconciler struct {
	client.Client
	Runtime  workload.Runtime
	Recorder events.EventRecorder
	// Verifier checks that available pods answer MCP with the expected tools before the
	// SkillServer is Ready; nil leaves Ready to the workload's availability.
	Verifier ToolLister
	// Issuer gives the cluster's service-account issuer keys to the servers that accept
	// service-account tokens; nil refuses such servers with IssuerKeysUnavailable.
	Issuer ServiceAccountIssuer
	// Revocations, when set, are the service accounts and pods deleted lately, whose
	// tokens the servers that accept service-account tokens refuse; nil checks no binding.
	Revocations BindingRevocations
	// IssuerChanged, when set, says that the issuer's keys rotated or the revocations
	// changed; the servers that accept service-account tokens are then rendered again.
	IssuerChanged <-chan event.GenericEvent
	// ContentCache holds the ConfigMaps labelled cantus.dev/content=true and is watched
	// for their changes; nil reads them through Client and sees changes only when the
	// SkillServer is reconciled again (see UseContentCache).
	ContentCache cache.Cache
	// APIReader reads a content ConfigMap the cache does not hold, to tell one without the
	// label from one that does not exist.
	APIReader client.Reader
	// Workers is how many SkillServers are reconciled at once (1 when zero).
	Workers int
	// APIAudiences are audiences of the API server (or of other services taking
	// service-account tokens) besides the issuer URL and the usual in-cluster ones: no
	// SkillServer may accept tokens issued for them.
	APIAudiences []string
	// ConnectEndpoint is the operator's token endpoint for gateways
	// (adapterconfig.ConnectTokenPath) as gateways reach it; ConnectCA gives the CA
	// bundle it is served with, published to them. Empty: no connect endpoint.
	ConnectEndpoint string
	ConnectCA       func() []byte
	// AdmissionParams, when set, are the parameters of the admission policy that bounds
	// the operator: a server whose pods it would refuse is refused before anything is
	// applied. Nil: no policy is known, and none is checked.
	AdmissionParams *AdmissionParams
	// MetadataReader reads ServiceAccounts and Secrets by metadata from the manager's
	// cache (SetupWithManager sets it to that cache when nil).
	MetadataReader client.Reader

	statuses       writtenStatuses
	contentRenders contentRenders
	// skippedCallerKeys holds, per server, a digest of the per-caller Secrets last
	// announced as not used, so that the event is sent once per change.
	skippedCallerKeys sync.Map
	// notRelayedTools holds, per server, a digest of the imported tools last announced
	// as left out for capabilities their import does not relay.
	notRelayedTools sync.Map
}

// ServiceAccountIssuer is the cluster's service-account token issuer and its keys.
type ServiceAccountIssuer interface {
	Current(ctx context.Context) (saissuer.Keys, error)
}

// BindingRevocations are the UIDs of the service accounts and pods deleted within the
// longest token lifetime the servers accept.
type BindingRevocations interface {
	Current(ctx context.Context) (saissuer.Revoked, error)
	Lifetime() time.Duration
}

// ToolLister lists the tools an MCP server serves.
type ToolLister interface {
	ListTools(ctx context.Context, target VerifyTarget) ([]mcpclient.Tool, error)
}

// +kubebuilder:rbac:groups=cantus.dev,resources=skillservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=cantus.dev,resources=skillservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps;services;persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=delete

// Reconcile computes the whole status in memory and patches it once, at the end.
func (r *SkillServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ss := &cantusv1alpha1.SkillServer{}
	if err := r.Get(ctx, req.NamespacedName, ss); err != nil {
		if apierrors.IsNotFound(err) {
			r.statuses.forget(req.NamespacedName)
			r.contentRenders.forget(req.NamespacedName)
			r.skippedCallerKeys.Delete(req.NamespacedName)
			r.notRelayedTools.Delete(req.NamespacedName)
			return ctrl.Result{}, r.Runtime.Forget(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("get SkillServer: %w", err)
	}
	if !ss.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.Runtime.Forget(ctx, req.NamespacedName)
	}

	before := ss.DeepCopy()
	defer func() {
		summarizeSkillServerReady(ss)
		result, retErr = r.statusWriter().finish(ctx, before, ss, skillServerStatus, result, retErr)
		r.recordWarnings(before, ss)
	}()
	return r.reconcile(ctx, ss)
}

// reconcile gathers what the config needs from the cluster, renders it, applies it and
// verifies what the workload serves.
func (r *SkillServerReconciler) reconcile(ctx context.Context, ss *cantusv1alpha1.SkillServer) (ctrl.Result, error) {
	// Shown by kubectl describe: the limits each pod applies, defaults included.
	limits := ss.Spec.Limits.Effective()
	ss.Status.Limits = &limits
	if allowed, err := r.checkPodOverrides(ctx, ss); !allowed || err != nil {
		// Refused: terminal until the spec or a policy changes (both are watched), or
		// the admission parameters (read again now and then).
		return refusedPodResult(ss), err
	}
	inputs, err := r.inputsOf(ctx, ss)
	if err != nil {
		return ctrl.Result{}, err
	}
	content, serve, err := r.renderContent(ctx, ss)
	if !serve || err != nil {
		return ctrl.Result{}, err
	}
	defer content.done()
	inputs.Content = content.content
	rendered, err := render.SkillServer(ss, inputs)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.announceNotRelayed(ss, rendered.Report.Imports.NotRelayed)
	if !setRendered(ss, rendered.Report, rendered.Config != nil) {
		// A spec that cannot work is terminal until it changes: no retry loop. What runs
		// keeps running the last good config, so nothing is lost.
		return ctrl.Result{}, nil
	}
	observed, keysDue, err := r.apply(ctx, ss, inputs, rendered, content)
	if conflict := (*workload.NameConflictError)(nil); errors.As(err, &conflict) {
		// Someone else's object is not watched: look again now and then, without the
		// error backoff's churn.
		setNameConflict(ss, conflict)
		return ctrl.Result{RequeueAfter: nameConflictRetry}, nil
	}
	if err != nil {
		setApplyFailed(ss, err)
		return ctrl.Result{}, err
	}
	// A cantus.dev/requestedAt request not handled yet verifies the pods again.
	_, requested := ss.Status.ReconcileRequested(ss.Annotations)
	verified := alreadyVerified(ss, rendered.Hash, observed.URL) && !requested
	setObserved(ss, observed, rendered.Hash, rendered.Report.Imports.Served)
	setDiscovery(ss, rendered.Config)
	retry := r.verifyIfNeeded(ctx, ss, observed, rendered.Config, verified)
	return ctrl.Result{RequeueAfter: sooner(retry, keysDue)}, nil
}

// apply writes the caller-keys and request state Secrets, which the pods mount, and
// then the workload. keysDue is when a rotated request state key is to be dropped.
func (r *SkillServerReconciler) apply(ctx context.Context, ss *cantusv1alpha1.SkillServer, inputs render.Inputs, rendered render.Result, content contentRender) (_ workload.Observation, keysDue time.Duration, _ error) {
	if err := r.applyCallerKeys(ctx, ss, inputs.Imports, rendered.Report.Imports); err != nil {
		return workload.Observation{}, 0, err
	}
	keysDue, err := r.applyRequestStateKeys(ctx, ss)
	if err != nil {
		return workload.Observation{}, 0, err
	}
	observed, err := r.applyWorkload(ctx, workload.Desired{
		SkillServer: ss, Config: rendered.Config, ConfigHash: rendered.Hash, RolloutHash: rendered.RolloutHash, Files: rendered.Files,
		ImageSkills: content.content.ImageSkills,
	}, content)
	return observed, keysDue, err
}

// inputsOf gathers what rendering reads from the cluster: the imports the server
// re-exports and, when it accepts service-account tokens, the cluster issuer's keys.
func (r *SkillServerReconciler) inputsOf(ctx context.Context, ss *cantusv1alpha1.SkillServer) (render.Inputs, error) {
	imports, err := r.importsOf(ctx, ss)
	if err != nil {
		return render.Inputs{}, err
	}
	cluster, err := r.clusterIssuer(ctx, ss)
	if err != nil {
		setCondition(ss, cantusv1alpha1.ConditionAvailable, metav1.ConditionFalse, cantusv1alpha1.ReasonIssuerKeysUnavailable, err.Error())
		return render.Inputs{}, err
	}
	auditPolicy, err := r.auditPolicyFor(ctx, ss)
	if err != nil {
		return render.Inputs{}, err
	}
	return render.Inputs{Imports: imports, Cluster: cluster, AuditPolicy: auditPolicy, ReservedAudiences: r.reservedAudiences(cluster), ConnectEndpoint: r.ConnectEndpoint}, nil
}

// importsOf reads the RemoteToolImports the SkillServer re-exports, by name.
func (r *SkillServerReconciler) importsOf(ctx context.Context, ss *cantusv1alpha1.SkillServer) (map[string]*cantusv1alpha1.RemoteToolImport, error) {
	out := map[string]*cantusv1alpha1.RemoteToolImport{}
	for _, spec := range ss.Spec.Imports {
		imp := &cantusv1alpha1.RemoteToolImport{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: spec.Name}, imp)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get RemoteToolImport %s: %w", spec.Name, err)
		}
		out[spec.Name] = imp
	}
	return out, nil
}

// clusterIssuer reads the cluster issuer's keys and the revoked bindings when the server
// accepts service-account tokens; an OIDC server gets the issuer's URL only, so that
// render refuses it as an OIDC issuer; other servers need neither.
func (r *SkillServerReconciler) clusterIssuer(ctx context.Context, ss *cantusv1alpha1.SkillServer) (adapterconfig.Issuer, error) {
	if !render.ServesServiceAccountTokens(ss) {
		return r.clusterIssuerURL(ctx, ss), nil
	}
	if r.Issuer == nil {
		return adapterconfig.Issuer{}, errors.New("this operator was started without the cluster's service-account issuer keys, so it cannot check service-account tokens")
	}
	keys, err := r.Issuer.Current(ctx)
	if err != nil {
		return adapterconfig.Issuer{}, fmt.Errorf("read the cluster's service-account issuer keys to check service-account tokens: %w", err)
	}
	cluster := adapterconfig.Issuer{URL: keys.URL, JWKS: keys.JWKS}
	if r.Revocations != nil {
		revoked, err := r.Revocations.Current(ctx)
		if err != nil {
			return adapterconfig.Issuer{}, fmt.Errorf("read the revoked service-account bindings: %w", err)
		}
		cluster.RevokedUIDs, cluster.RevokedServiceAccountUIDs = revoked.Pods, revoked.ServiceAccounts
		for namespace, before := range revoked.RefuseIssuedBefore {
			if cluster.RefuseIssuedBeforeByNamespace == nil {
				cluster.RefuseIssuedBeforeByNamespace = make(map[string]time.Time, len(revoked.RefuseIssuedBefore))
			}
			// Up to the next second: a token's iat has whole seconds.
			cluster.RefuseIssuedBeforeByNamespace[namespace] = before.UTC().Add(time.Second - 1).Truncate(time.Second)
		}
		cluster.MaxTokenLifetime = &adapterconfig.Duration{Duration: r.Revocations.Lifetime()}
	}
	return cluster, nil
}

// clusterIssuerURL is the cluster issuer's URL for a server that accepts OIDC tokens, as
// far as it can be read: without it, render still refuses the API server's usual URLs,
// and the adapter refuses service-account tokens from any OIDC issuer. An OIDC server
// does not wait for the cluster's keys.
func (r *SkillServerReconciler) clusterIssuerURL(ctx context.Context, ss *cantusv1alpha1.SkillServer) adapterconfig.Issuer {
	if ss.Spec.Auth == nil || ss.Spec.Auth.OIDC == nil || r.Issuer == nil {
		return adapterconfig.Issuer{}
	}
	keys, err := r.Issuer.Current(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("the cluster's service-account issuer is unknown; its usual URLs are refused as an OIDC issuer", "error", err.Error())
		return adapterconfig.Issuer{}
	}
	return adapterconfig.Issuer{URL: keys.URL}
}

// statusWriter announces changes of Ready as events.
func (r *SkillServerReconciler) statusWriter() statusWriter {
	return statusWriter{client: r.Client, recorder: r.Recorder, announced: cantusv1alpha1.ConditionReady, action: "Reconcile", written: &r.statuses}
}

// SetupWithManager registers the reconciler; the runtime says which children to watch.
func (r *SkillServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&cantusv1alpha1.SkillServer{}, builder.WithPredicates(specOrRequestChanged)).
		Named("skillserver").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)})
	for _, owned := range r.Runtime.OwnedTypes() {
		b = b.Owns(owned)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cantusv1alpha1.SkillServer{}, importRefIndex, importRefs); err != nil {
		return fmt.Errorf("index SkillServers by import: %w", err)
	}
	b, err := r.watchContent(mgr, b)
	if err != nil {
		return err
	}
	// An import that changes (tools, readiness) changes the servers that re-export it.
	b = b.Watches(&cantusv1alpha1.RemoteToolImport{}, handler.EnqueueRequestsFromMapFunc(r.serversReexporting))
	// A policy that comes to allow (or stops allowing) a pod override decides anew.
	b = b.Watches(&cantusv1alpha1.ToolSourcePolicy{}, handler.EnqueueRequestsFromMapFunc(r.serversWithPodOverrides))
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cantusv1alpha1.SkillServer{}, authSecretIndex, authSecrets); err != nil {
		return fmt.Errorf("index SkillServers by bearer token Secret: %w", err)
	}
	// A rotated token Secret is rewritten for the local runtime's adapters (pods get it
	// from the kubelet); by metadata only, so that the cache holds no Secret values.
	b = b.WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.serversReadingSecret))
	// A per-caller Secret, or the service account it names (whose UID keys it), changed:
	// the caller-keys Secret is gathered again. By metadata only, like the Secrets above.
	if r.MetadataReader == nil {
		r.MetadataReader = mgr.GetCache()
	}
	b = b.WatchesMetadata(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(r.serversOfCaller))
	if r.IssuerChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.IssuerChanged, handler.EnqueueRequestsFromMapFunc(r.serversTrustingServiceAccounts)))
	}
	return b.Complete(traced("skillserver", r))
}

const authSecretIndex = "cantus.dev/bearer-secret" //nolint:gosec // G101: an index name, not a credential

func authSecrets(obj client.Object) []string {
	if ref := obj.(*cantusv1alpha1.SkillServer).Spec.BearerTokenRef(); ref != nil {
		return []string{ref.Name}
	}
	return nil
}

func (r *SkillServerReconciler) serversReadingSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	return slices.Concat(r.serversIndexed(ctx, secret, authSecretIndex, secret.GetName(), "that read a Secret"), r.serversUsingCallerSecret(ctx, secret), serverOfRequestStateSecret(secret))
}

// serversTrustingServiceAccounts are every server that accepts service-account tokens,
// after the cluster issuer's keys rotated.
func (r *SkillServerReconciler) serversTrustingServiceAccounts(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.serversWhere(ctx, "that accept service-account tokens", render.ServesServiceAccountTokens)
}

const importRefIndex = "cantus.dev/import-refs"

func importRefs(obj client.Object) []string {
	ss := obj.(*cantusv1alpha1.SkillServer)
	names := make([]string, 0, len(ss.Spec.Imports))
	for _, i := range ss.Spec.Imports {
		names = append(names, i.Name)
	}
	return names
}

func (r *SkillServerReconciler) serversReexporting(ctx context.Context, imp client.Object) []reconcile.Request {
	return r.serversIndexed(ctx, imp, importRefIndex, imp.GetName(), "that re-export an import")
}

// serversIndexed are the SkillServers in obj's namespace whose index holds value: the
// servers that name obj (a Secret, a content ConfigMap, an import). what ends the log
// line of a failed list.
func (r *SkillServerReconciler) serversIndexed(ctx context.Context, obj client.Object, index, value, what string) []reconcile.Request {
	list := &cantusv1alpha1.SkillServerList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list SkillServers "+what)
		return nil
	}
	return requestsFor(list.Items)
}

// serversWhere are the SkillServers of every namespace for which concerned is true:
// those a cluster-wide object (a policy, the issuer's keys) may change. what ends the
// log line of a failed list.
func (r *SkillServerReconciler) serversWhere(ctx context.Context, what string, concerned func(*cantusv1alpha1.SkillServer) bool) []reconcile.Request {
	list := &cantusv1alpha1.SkillServerList{}
	if err := r.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list SkillServers "+what)
		return nil
	}
	list.Items = slices.DeleteFunc(list.Items, func(ss cantusv1alpha1.SkillServer) bool { return !concerned(&ss) })
	return requestsFor(list.Items)
}

func requestsFor(servers []cantusv1alpha1.SkillServer) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(servers))
	for i := range servers {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&servers[i])})
	}
	return reqs
}
