package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/policy"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

const (
	// Failed probes are retried from retryBase, doubling, up to retryCap.
	retryBase = 5 * time.Second
	retryCap  = 5 * time.Minute
	// secretRefIndex indexes imports by the Secrets they read, so a changed Secret
	// re-runs exactly the handshakes that use it.
	secretRefIndex = "cantus.dev/secret-refs" //nolint:gosec // G101: an index name, not a credential
)

// Prober runs the MCP handshake; mcpclient.Probe in production.
type Prober func(ctx context.Context, opts mcpclient.Options) (*mcpclient.Result, error)

// Bridges runs stdio sources behind a streamable HTTP bridge.
type Bridges interface {
	// Ensure starts or updates the bridge, admitting only access, and returns its URL
	// once it serves.
	Ensure(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, access workload.BridgeAccess) (url string, ready bool, err error)
	// Forget stops the bridge of an import that no longer exists.
	Forget(ctx context.Context, key types.NamespacedName) error
}

// RemoteToolImportReconciler checks each import against the ToolSourcePolicies, runs the
// MCP handshake, and reports exactly what happened.
type RemoteToolImportReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Prober   Prober
	Resolver policy.Resolver
	Bridges  Bridges
	// MaxConcurrentHandshakes bounds parallel reconciles; a hanging remote holds one for
	// at most its timeout, so the others keep going.
	MaxConcurrentHandshakes int
	Now                     func() time.Time
	// ListChanges re-runs the handshake of pinned imports when their remote says a
	// list changed; SetupWithManager makes one when nil.
	ListChanges *ListChangeWatcher
	// AdmissionParams, when set, are the parameters of the admission policy that bounds
	// the operator: a stdio import whose bridge it would refuse is refused before the
	// bridge is applied. Nil: no policy is known, and none is checked.
	AdmissionParams *AdmissionParams
	// MetadataReader reads Secrets by metadata from the manager's cache, to count an
	// import's per-caller Secrets (SetupWithManager sets it to that cache when nil).
	MetadataReader client.Reader
	// Connect, when set, are the operator's connect endpoints; nil: imports in connect
	// mode are refused (ConnectUnavailable).
	Connect *ConnectSettings

	statuses    writtenStatuses
	probeTokens probeTokens
}

// +kubebuilder:rbac:groups=cantus.dev,resources=remotetoolimports,verbs=get;list;watch
// +kubebuilder:rbac:groups=cantus.dev,resources=remotetoolimports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cantus.dev,resources=toolsourcepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=cantus.dev,resources=definitionapprovals,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch

// Reconcile computes the status in memory and patches it once.
func (r *RemoteToolImportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	imp := &cantusv1alpha1.RemoteToolImport{}
	if err := r.Get(ctx, req.NamespacedName, imp); err != nil {
		if apierrors.IsNotFound(err) {
			r.stopWatching(req.NamespacedName)
			r.statuses.forget(req.NamespacedName)
			r.probeTokens.forget(req.NamespacedName)
			return ctrl.Result{}, r.forgetBridge(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("get RemoteToolImport: %w", err)
	}
	before := imp.DeepCopy()
	defer func() {
		summarizeImportReady(imp)
		result, retErr = r.statusWriter().finish(ctx, before, imp, importStatus, result, retErr)
	}()
	return r.reconcile(ctx, imp)
}

func (r *RemoteToolImportReconciler) reconcile(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (ctrl.Result, error) {
	if problems := imp.Spec.Problems(); len(problems) > 0 {
		// Terminal until the spec changes: no retry loop, and nothing is dialled.
		setImportStalled(imp, strings.Join(problems, "; "))
		r.stopWatching(client.ObjectKeyFromObject(imp))
		return ctrl.Result{}, nil
	}
	removeCondition(imp, cantusv1alpha1.ConditionStalled)
	checker, err := r.checkerFor(ctx, imp.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	decision := checkSource(ctx, checker, imp)
	if decision.Allowed {
		if decision, err = r.checkBridgeAdmission(ctx, imp, decision); err != nil {
			return ctrl.Result{}, err
		}
	}
	if decision.Allowed {
		decision = checkTokenEndpoint(ctx, checker, imp, decision)
		decision = checkProbeTokenEndpoint(ctx, checker, imp, decision)
	}
	var connectChecked *connectCheck
	if decision.Allowed {
		decision, connectChecked = r.checkConnect(ctx, checker, imp, decision)
	}
	setSourceAllowed(imp, decision)
	if !decision.Allowed {
		setCallerCredentialsStatus(imp, nil, 0)
		setNotAllowed(imp, decision)
		clearContent(imp)
		r.stopWatching(client.ObjectKeyFromObject(imp))
		var result ctrl.Result
		switch decision.Reason {
		case cantusv1alpha1.ReasonPodNotAdmitted:
			result.RequeueAfter = admissionRecheck // the parameters are not watched
		case cantusv1alpha1.ReasonAuthorizationServerUnknown:
			result.RequeueAfter = retryDelay(imp) // its metadata may come back
		}
		return result, r.forgetBridge(ctx, client.ObjectKeyFromObject(imp))
	}

	opts, reason, err := r.probeOptions(ctx, imp, checker)
	if err == nil {
		reason, err = r.withProbeIdentity(ctx, imp, connectChecked, &opts)
	}
	if err != nil {
		setPrerequisiteMissing(imp, reason, err.Error())
		if reason == cantusv1alpha1.ReasonProbeIdentityNotConnected {
			// Its service account connects through the endpoints checked now, which the
			// connect pages read from the status.
			if err := r.recordCallerCredentials(ctx, imp, decision); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.setConnectStatus(ctx, imp, connectChecked); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: retryDelay(imp)}, nil
	}
	if opts.URL == "" { // a stdio bridge still starting
		return ctrl.Result{RequeueAfter: retryBase}, nil
	}

	probeCtx, cancel := context.WithTimeout(ctx, opts.Timeout+time.Second)
	defer cancel()
	res, err := r.Prober(probeCtx, opts)
	probedAt := r.now()
	recordProbe(imp, probeOutcome(err), probedAt)
	if err := r.recordCallerCredentials(ctx, imp, decision); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.setConnectStatus(ctx, imp, connectChecked); err != nil {
		return ctrl.Result{}, err
	}
	if err != nil {
		setHandshakeFailed(imp, err, probedAt)
		explainProbeIdentity(imp, err)
		return ctrl.Result{RequeueAfter: retryDelay(imp)}, nil
	}
	approving, err := r.approvingDigests(ctx, imp)
	if err != nil {
		return ctrl.Result{}, err
	}
	hadCatalog := imp.Status.CatalogDigest != ""
	previous := imp.Status.DeepCopy()
	catalog := catalogOf(res).filtered(imp.Spec.Tools)
	tools := catalog.tools
	added, removed := setHandshakeSucceeded(imp, res, tools, probedAt)
	contentChange := setContentDiscovered(imp, res, tools)
	catalog.record(imp)
	imp.Status.Addresses = checkedAddresses(decision)
	if hadCatalog && (len(added) > 0 || len(removed) > 0) {
		r.event(imp, corev1.EventTypeNormal, "ToolsChanged", describeToolChange(added, removed))
	}
	if hadCatalog && contentChange != "" {
		r.event(imp, corev1.EventTypeNormal, "ContentChanged", contentChange)
	}
	approval := applyApproval(imp, previous, tools, approving)
	if m := approval.migration; m != nil {
		eventType := corev1.EventTypeNormal
		if len(m.held) > 0 {
			eventType = corev1.EventTypeWarning
		}
		r.event(imp, eventType, "DigestMigrated", m.note())
	}
	if approval.newlyPending {
		r.event(imp, corev1.EventTypeWarning, "DefinitionsChanged", pendingMessage(imp, imp.Status.Approval.Changes))
	}
	r.watchIfNeeded(ctx, imp, opts, checker)
	return ctrl.Result{RequeueAfter: wait.Jitter(refreshInterval(imp), 0.1)}, nil
}

// checkBridgeAdmission refuses a stdio import whose bridge the operator's admission
// policy would refuse (its image is not in the parameters' bridgeImages, or the
// namespace's default service account, which bridge pods run under, is not in its
// serviceAccounts) before the bridge is applied: applied, the Deployment would be
// denied on every reconcile.
func (r *RemoteToolImportReconciler) checkBridgeAdmission(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, allowed policy.Decision) (policy.Decision, error) {
	if r.AdmissionParams == nil || imp.Spec.Stdio == nil {
		return allowed, nil
	}
	refusal, err := r.AdmissionParams.CheckBridgeImage(ctx, imp.Spec.Stdio.Image)
	if err == nil && refusal == nil {
		refusal, err = r.AdmissionParams.CheckServiceAccount(ctx, imp.Namespace, "default")
	}
	if err != nil || refusal == nil {
		return allowed, err
	}
	return policy.Decision{Reason: cantusv1alpha1.ReasonPodNotAdmitted, Message: refusal.Message}, nil
}

// watchIfNeeded keeps a session with the remote of an import that is pinned or that a
// gateway re-exports, so that its list_changed notifications re-run the handshake (and
// a gateway's clients see the change) at once, and ends that of any other.
func (r *RemoteToolImportReconciler) watchIfNeeded(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, opts mcpclient.Options, checker *policy.Checker) {
	if r.ListChanges == nil {
		return
	}
	key := client.ObjectKeyFromObject(imp)
	if !watchable(imp) || (!pinned(imp) && !r.reexported(ctx, imp)) {
		r.ListChanges.Stop(key)
		return
	}
	r.ListChanges.Ensure(ctx, key, opts, slices.Contains(imp.Status.Eras, mcpclient.EraModern), checker)
}

// reexported says whether a SkillServer of the import's namespace imports it; false
// when that cannot be told (the index of imports is the SkillServer controller's).
func (r *RemoteToolImportReconciler) reexported(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) bool {
	var servers cantusv1alpha1.SkillServerList
	if err := r.List(ctx, &servers, client.InNamespace(imp.Namespace), client.MatchingFields{importRefIndex: imp.Name}); err != nil {
		return false
	}
	return len(servers.Items) > 0
}

func (r *RemoteToolImportReconciler) stopWatching(key types.NamespacedName) {
	if r.ListChanges != nil {
		r.ListChanges.Stop(key)
	}
}

func (r *RemoteToolImportReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// checkerFor gathers the policies whose namespaceSelector selects the namespace.
func (r *RemoteToolImportReconciler) checkerFor(ctx context.Context, namespace string) (*policy.Checker, error) {
	return policyCheckerFor(ctx, r.Client, namespace, r.Resolver)
}

// policyCheckerFor gathers the policies whose namespaceSelector selects the namespace.
func policyCheckerFor(ctx context.Context, c client.Reader, namespace string, resolver policy.Resolver) (*policy.Checker, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	all := &cantusv1alpha1.ToolSourcePolicyList{}
	if err := c.List(ctx, all); err != nil {
		return nil, fmt.Errorf("list ToolSourcePolicies: %w", err)
	}
	checker := &policy.Checker{Namespace: namespace, Resolver: resolver}
	for _, p := range all.Items {
		selector := labels.Everything()
		if p.Spec.NamespaceSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
			if err != nil {
				continue // the API server validated it; a selector that does not parse selects nothing
			}
			selector = s
		}
		if selector.Matches(labels.Set(ns.Labels)) {
			checker.Policies = append(checker.Policies, p)
		}
	}
	return checker, nil
}

func checkSource(ctx context.Context, checker *policy.Checker, imp *cantusv1alpha1.RemoteToolImport) policy.Decision {
	if imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio && imp.Spec.Stdio != nil {
		return checker.CheckStdio(imp.Spec.Stdio.Image, imp.Spec.Stdio.Command)
	}
	return checker.CheckURL(ctx, imp.Spec.URL)
}

// probeOptions assembles the handshake: URL (or the stdio bridge's), headers and CA from
// Secrets, and the policy's dialer and redirect check.
func (r *RemoteToolImportReconciler) probeOptions(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, checker *policy.Checker) (mcpclient.Options, string, error) {
	opts := mcpclient.Options{
		URL:           imp.Spec.URL,
		Transport:     string(imp.Spec.Transport),
		Timeout:       probeTimeout(imp),
		Dial:          checker.DialContext,
		CheckRedirect: checker.CheckRedirect,
	}
	if imp.Spec.Transport != cantusv1alpha1.ImportTransportStdio {
		// What a gateway can relay, so that the import lists the tools a remote offers
		// only to clients that can answer them; a stdio bridge relays nothing.
		opts.Capabilities = mcpclient.RelayableCapabilities()
	}
	var bridgeToken string
	if imp.Spec.Transport == cantusv1alpha1.ImportTransportStdio {
		url, token, reason, err := r.bridgeURL(ctx, imp)
		if err != nil {
			return opts, reason, err
		}
		bridgeToken = token
		// The policy judged the image and command instead of an address. The bridge's
		// Service is in the tenant's namespace, so whatever answers there is not trusted
		// to send the manager elsewhere: it dials the bridge's own host and port only and
		// follows no redirect.
		opts.URL, opts.Transport = url, string(cantusv1alpha1.ImportTransportStreamableHTTP)
		opts.Dial, opts.CheckRedirect = dialOnly(url), refuseRedirects
	}
	headers, err := r.headers(ctx, imp)
	if err != nil {
		return opts, cantusv1alpha1.ReasonSecretNotFound, err
	}
	opts.Headers = headers
	if bridgeToken != "" {
		opts.Headers = withBridgeToken(headers, bridgeToken)
	}
	if probeGrant(imp) != nil {
		token, err := r.probeToken(ctx, imp, checker, opts.Timeout)
		if err != nil {
			return opts, cantusv1alpha1.ReasonProbeTokenFailed, err
		}
		opts.Headers = withBridgeToken(headers, token)
	}
	ca, err := r.caBundle(ctx, imp)
	if err != nil {
		return opts, cantusv1alpha1.ReasonSecretNotFound, err
	}
	opts.CABundle = ca
	if err := r.checkClientCredential(ctx, imp); err != nil {
		return opts, cantusv1alpha1.ReasonSecretNotFound, err
	}
	return opts, "", nil
}

// bridgeURL ensures the import's bridge and returns its URL and token once it serves.
func (r *RemoteToolImportReconciler) bridgeURL(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (url, token, reason string, err error) {
	if r.Bridges == nil {
		return "", "", cantusv1alpha1.ReasonBridgeNotReady, errors.New("this operator runs no stdio bridges")
	}
	access, err := r.bridgeAccess(ctx, imp)
	if err != nil {
		return "", "", bridgeReason(err), fmt.Errorf("stdio bridge: %w", err)
	}
	url, ready, err := r.Bridges.Ensure(ctx, imp, access)
	if err != nil {
		return "", "", bridgeReason(err), fmt.Errorf("stdio bridge: %w", err)
	}
	imp.Status.BridgeURL = url
	if !ready {
		setPrerequisiteMissing(imp, cantusv1alpha1.ReasonBridgeNotReady, "waiting for the stdio bridge to serve")
		return "", "", "", nil
	}
	return url, access.Token, "", nil
}

func probeOutcome(err error) string {
	if err != nil {
		return "failed"
	}
	return "succeeded"
}

// checkedAddresses are the addresses a gateway may connect to: those the policy check
// resolved and accepted (none for a stdio import, whose bridge is reached by name).
func checkedAddresses(d policy.Decision) []string {
	out := make([]string, 0, min(len(d.Addresses), 16))
	for _, a := range d.Addresses[:min(len(d.Addresses), 16)] {
		out = append(out, a.String())
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// dialOnly returns a dialer that connects to the host and port of rawURL and nothing else.
func dialOnly(rawURL string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	want := ""
	if u, err := url.Parse(rawURL); err == nil {
		want = u.Host
		if u.Port() == "" {
			want = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != want {
			return nil, fmt.Errorf("the stdio bridge path dials only its own endpoint %s, not %s", want, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

func refuseRedirects(target *url.URL) error {
	return fmt.Errorf("the stdio bridge answered with a redirect to %s, which is not followed", target.Redacted())
}

func (r *RemoteToolImportReconciler) forgetBridge(ctx context.Context, key types.NamespacedName) error {
	if r.Bridges == nil {
		return nil
	}
	return r.Bridges.Forget(ctx, key)
}

func (r *RemoteToolImportReconciler) headers(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) (map[string]string, error) {
	if len(imp.Spec.Headers) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(imp.Spec.Headers))
	for _, h := range imp.Spec.Headers {
		value, err := secretValue(ctx, r.Client, imp.Namespace, h.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", h.Name, err)
		}
		out[h.Name] = value
	}
	return out, nil
}

func (r *RemoteToolImportReconciler) caBundle(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport) ([]byte, error) {
	if imp.Spec.TLS == nil || imp.Spec.TLS.CABundle == nil {
		return nil, nil
	}
	ref := imp.Spec.TLS.CABundle
	if ref.SecretRef != nil {
		v, err := secretValue(ctx, r.Client, imp.Namespace, *ref.SecretRef)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		return []byte(v), nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: imp.Namespace, Name: ref.ConfigMapRef.Name}, cm); err != nil {
		return nil, fmt.Errorf("CA bundle ConfigMap %s: %w", ref.ConfigMapRef.Name, err)
	}
	key := ref.ConfigMapRef.KeyOrDefault()
	v, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("CA bundle ConfigMap %s has no key %q", ref.ConfigMapRef.Name, key)
	}
	return []byte(v), nil
}

// secretValue reads one Secret key. Errors name the Secret and key, never the value.
func secretValue(ctx context.Context, c client.Reader, namespace string, ref cantusv1alpha1.SecretKeyRef) (string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
		return "", fmt.Errorf("read the Secret %s: %w", ref.Name, err)
	}
	key := ref.KeyOrDefault()
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("the Secret %s has no key %q", ref.Name, key)
	}
	return string(v), nil
}

// filterTools keeps the tools whose names match an include glob (all when none) and no
// exclude glob.
func filterTools(tools []mcpclient.Tool, f *cantusv1alpha1.ToolFilter) []mcpclient.Tool {
	if f == nil {
		return tools
	}
	out := make([]mcpclient.Tool, 0, len(tools))
	for _, t := range tools {
		if render.GlobSelected(f.Include, f.Exclude, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func refreshInterval(imp *cantusv1alpha1.RemoteToolImport) time.Duration {
	return imp.Spec.RefreshIntervalOrDefault()
}

func probeTimeout(imp *cantusv1alpha1.RemoteToolImport) time.Duration {
	return imp.Spec.TimeoutOrDefault()
}

// retryDelay backs off exponentially with jitter after consecutive failures, capped by
// retryCap and the refresh interval.
func retryDelay(imp *cantusv1alpha1.RemoteToolImport) time.Duration {
	limit := min(retryCap, refreshInterval(imp))
	exp := math.Min(float64(imp.Status.ConsecutiveFailures), 16)
	d := time.Duration(float64(retryBase) * math.Pow(2, math.Max(exp-1, 0)))
	return wait.Jitter(min(d, limit), 0.2)
}

// statusWriter announces changes of the handshake as events.
func (r *RemoteToolImportReconciler) statusWriter() statusWriter {
	return statusWriter{
		client: r.Client, recorder: r.Recorder, announced: cantusv1alpha1.ConditionHandshakeSucceeded, action: "Handshake",
		written: &r.statuses,
		settle: func(before, after conditioned) {
			keepProbeTimesIfNothingElseChanged(before.(*cantusv1alpha1.RemoteToolImport), after.(*cantusv1alpha1.RemoteToolImport))
		},
	}
}

func (r *RemoteToolImportReconciler) event(imp *cantusv1alpha1.RemoteToolImport, eventType, reason, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(imp, nil, eventType, reason, "Handshake", "%s", note)
	}
}

// SetupWithManager watches imports, the policies and namespaces that decide whether they
// are allowed, and the Secrets they read.
func (r *RemoteToolImportReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Prober == nil {
		r.Prober = mcpclient.Probe
	}
	if r.MaxConcurrentHandshakes == 0 {
		r.MaxConcurrentHandshakes = 32
	}
	if r.ListChanges == nil {
		r.ListChanges = NewListChangeWatcher()
	}
	if err := mgr.Add(r.ListChanges); err != nil {
		return fmt.Errorf("add the list-change watcher: %w", err)
	}
	if r.MetadataReader == nil {
		r.MetadataReader = mgr.GetCache()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &cantusv1alpha1.RemoteToolImport{}, secretRefIndex, secretRefs); err != nil {
		return fmt.Errorf("index RemoteToolImports by Secret: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if owner, ok := r.Bridges.(interface{ OwnedTypes() []client.Object }); ok {
		// A bridge Deployment becoming available must re-run the handshake through it.
		for _, owned := range owner.OwnedTypes() {
			b = b.Owns(owned)
		}
	}
	return b.
		For(&cantusv1alpha1.RemoteToolImport{}, builder.WithPredicates(specOrRequestChanged)).
		Watches(&cantusv1alpha1.ToolSourcePolicy{}, handler.EnqueueRequestsFromMapFunc(r.allImports),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// An approval given or withdrawn by its own object applies at once.
		Watches(&cantusv1alpha1.DefinitionApproval{}, handler.EnqueueRequestsFromMapFunc(importsApprovedBy)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.importsInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// By metadata only: a changed resourceVersion is all it takes to re-run the
		// handshakes that read the Secret, and the cache then holds no Secret values.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.importsReadingSecret)).
		// The bridge of a stdio import admits the pods of the servers that import it.
		Watches(&cantusv1alpha1.SkillServer{}, handler.EnqueueRequestsFromMapFunc(r.stdioImportsOf),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A pinned import's remote said a list changed.
		WatchesRawSource(source.Channel(r.ListChanges.events, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentHandshakes}).
		Named("remotetoolimport").
		Complete(traced("remotetoolimport", r))
}

func secretRefs(obj client.Object) []string {
	imp := obj.(*cantusv1alpha1.RemoteToolImport)
	var names []string
	for _, h := range imp.Spec.Headers {
		names = append(names, h.ValueFrom.Name)
	}
	if imp.Spec.TLS != nil && imp.Spec.TLS.CABundle != nil && imp.Spec.TLS.CABundle.SecretRef != nil {
		names = append(names, imp.Spec.TLS.CABundle.SecretRef.Name)
	}
	names = append(names, clientCredentialRefs(imp)...)
	names = append(names, probeSecretRefs(imp)...)
	return append(names, bridgeSecretRef(imp)...)
}

func (r *RemoteToolImportReconciler) allImports(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.importRequests(ctx)
}

func (r *RemoteToolImportReconciler) importsInNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return r.importRequests(ctx, client.InNamespace(ns.GetName()))
}

func (r *RemoteToolImportReconciler) importsReadingSecret(ctx context.Context, s client.Object) []reconcile.Request {
	return r.importRequests(ctx, client.InNamespace(s.GetNamespace()), client.MatchingFields{secretRefIndex: s.GetName()})
}

func (r *RemoteToolImportReconciler) importRequests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &cantusv1alpha1.RemoteToolImportList{}
	if err := r.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list RemoteToolImports to re-evaluate")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, imp := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&imp)})
	}
	return reqs
}
