package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// Bounds of a gateway's caller-keys Secret: one caller's key, and all of them together,
// below the API server's 1 MiB for one object with room for its metadata.
const (
	maxCallerKeyBytes  = 16 << 10
	maxCallerKeysBytes = 1<<20 - 64<<10
)

// Prefixes of the cantus.dev/caller annotation of a per-caller Secret.
const (
	callerServiceAccountPrefix = "serviceaccount:"
	callerOIDCPrefix           = "oidc:"
)

// callerKeys is what the per-caller Secrets of a gateway's imports give its
// caller-keys Secret.
type callerKeys struct {
	data map[string][]byte
	// skipped says which per-caller Secrets were left out and why, by Secret name only.
	skipped []string
	// tooLarge says why the keys were not written, when they do not fit in one Secret.
	tooLarge string
}

// Service accounts are read from the manager's cache by metadata; list and watch of
// them are granted already (revocations).

// gatherCallerKeys reads the per-caller Secrets of each import in names (labelled
// cantus.dev/caller-credentials-for=<import> in the server's namespace) from the API
// server, so that their values never enter a cache, and keys each value by the caller's
// identity: a service account's with its current UID (a recreated account is a new
// caller, and gets no key of the old one), or an OIDC issuer and subject.
func (r *SkillServerReconciler) gatherCallerKeys(ctx context.Context, ss *cantusv1alpha1.SkillServer, imports map[string]*cantusv1alpha1.RemoteToolImport, names []string) (callerKeys, error) {
	out := callerKeys{data: map[string][]byte{}}
	total := 0
	for _, name := range names {
		imp := imports[name]
		key := imp.Spec.CallerCredentials.PerCallerSecret.KeyOrDefault()
		var list corev1.SecretList
		if err := r.List(ctx, &list, client.InNamespace(ss.Namespace), client.MatchingLabels{cantusv1alpha1.LabelCallerCredentialsFor: name}); err != nil {
			return callerKeys{}, fmt.Errorf("list the per-caller Secrets of import %s: %w", name, err)
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		for i := range list.Items {
			s := &list.Items[i]
			identity, why, err := r.callerIdentity(ctx, s.Annotations[cantusv1alpha1.AnnotationCaller])
			if err != nil {
				return callerKeys{}, err
			}
			value, ok := s.Data[key]
			switch {
			case why != "":
			case !ok:
				why = fmt.Sprintf("it has no key %q (spec.callerCredentials.perCallerSecret.key of import %s)", key, name)
			case len(value) > maxCallerKeyBytes:
				why = fmt.Sprintf("its key %q holds %d bytes, more than the %d a caller's credential may have", key, len(value), maxCallerKeyBytes)
			}
			file := adapterconfig.CallerKeyFileName(ss.Namespace+"/"+name, identity)
			if _, dup := out.data[file]; why == "" && dup {
				why = fmt.Sprintf("another Secret (the first by name) already holds this caller's credential for import %s", name)
			}
			if why != "" {
				out.skipped = append(out.skipped, fmt.Sprintf("Secret %s: %s", s.Name, why))
				continue
			}
			total += len(file) + len(value)
			if total > maxCallerKeysBytes {
				out.tooLarge = fmt.Sprintf("the per-caller credentials of the imports %s come to more than the %d bytes one Secret can hold (Kubernetes bounds a Secret at 1 MiB), so the caller-keys Secret %s keeps what it held; remove unused per-caller Secrets or split the imports among more gateways",
					strings.Join(names, ", "), maxCallerKeysBytes, render.CallerKeysSecretName(ss.Name))
				return out, nil
			}
			out.data[file] = value
		}
	}
	return out, nil
}

// callerIdentity is the identity a cantus.dev/caller annotation names, or why it names
// none: "serviceaccount:<namespace>/<name>" (the account must exist: its UID is part of
// the identity) or "oidc:<issuer>#<subject>".
func (r *SkillServerReconciler) callerIdentity(ctx context.Context, annotation string) (identity, why string, err error) {
	if rest, ok := strings.CutPrefix(annotation, callerOIDCPrefix); ok {
		issuer, subject, found := strings.Cut(rest, "#")
		if !found || issuer == "" || subject == "" {
			return "", "its annotation " + cantusv1alpha1.AnnotationCaller + " is not oidc:<issuer>#<subject>", nil
		}
		return adapterconfig.OIDCCaller(issuer, subject), "", nil
	}
	rest, ok := strings.CutPrefix(annotation, callerServiceAccountPrefix)
	namespace, name, found := strings.Cut(rest, "/")
	if !ok || !found || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "its annotation " + cantusv1alpha1.AnnotationCaller + " is neither serviceaccount:<namespace>/<name> nor oidc:<issuer>#<subject>", nil
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	if err := r.metadataReader().Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sa); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "the service account it names does not exist", nil
		}
		return "", "", fmt.Errorf("get the service account of a per-caller Secret: %w", err)
	}
	return adapterconfig.ServiceAccountCaller(namespace+"/"+name, string(sa.UID)), "", nil
}

// metadataReader reads metadata from the manager's cache.
func (r *SkillServerReconciler) metadataReader() client.Reader {
	if r.MetadataReader != nil {
		return r.MetadataReader
	}
	return r.Client
}

// applyCallerKeys writes the gateway's caller-keys Secret when its imports need it, and
// reports on it in the CallerCredentialsReady condition.
func (r *SkillServerReconciler) applyCallerKeys(ctx context.Context, ss *cantusv1alpha1.SkillServer, imports map[string]*cantusv1alpha1.RemoteToolImport, report render.Imports) error {
	if len(report.PerCallerSecret) == 0 && len(report.Connect) == 0 {
		setCallerCredentialsReady(ss, report, callerKeys{})
		return r.clearCallerKeys(ctx, ss)
	}
	keys, err := r.gatherCallerKeys(ctx, ss, imports, report.PerCallerSecret)
	if err != nil {
		return err
	}
	r.addConnectCA(report, &keys)
	r.announceSkipped(ss, keys.skipped)
	if keys.tooLarge != "" {
		setCallerCredentialsReady(ss, report, keys)
		// The pods mount the Secret: it must exist, even while it cannot be brought up to date.
		return r.ensureCallerKeysExist(ctx, ss)
	}
	if err := workload.EnsureCallerKeys(ctx, r.Client, ss, keys.data); err != nil {
		return err
	}
	setCallerCredentialsReady(ss, report, keys)
	return nil
}

// clearCallerKeys empties the caller-keys Secret of a server that no longer serves an
// import with per-caller Secrets, so that it holds no caller's key for nothing. It looks
// in the cache's metadata first: most servers never had one, and cost no API call.
func (r *SkillServerReconciler) clearCallerKeys(ctx context.Context, ss *cantusv1alpha1.SkillServer) error {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.metadataReader().Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: render.CallerKeysSecretName(ss.Name)}, meta)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up the caller-keys Secret: %w", err)
	}
	owner := metav1.GetControllerOfNoCopy(meta)
	if owner == nil || owner.UID != ss.UID || meta.Annotations[workload.AnnotationCallerKeys] == "0" {
		return nil
	}
	return workload.EnsureCallerKeys(ctx, r.Client, ss, nil)
}

func (r *SkillServerReconciler) ensureCallerKeysExist(ctx context.Context, ss *cantusv1alpha1.SkillServer) error {
	err := r.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: render.CallerKeysSecretName(ss.Name)}, &corev1.Secret{})
	if apierrors.IsNotFound(err) {
		return workload.EnsureCallerKeys(ctx, r.Client, ss, nil)
	}
	if err != nil {
		return fmt.Errorf("get the caller-keys Secret: %w", err)
	}
	return nil
}

// announceSkipped tells, once per change, which per-caller Secrets were left out: an
// event per reconcile would be a write while nothing changes.
func (r *SkillServerReconciler) announceSkipped(ss *cantusv1alpha1.SkillServer, skipped []string) {
	if !listChanged(&r.skippedCallerKeys, client.ObjectKeyFromObject(ss), skipped) {
		return
	}
	if len(skipped) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(ss, nil, corev1.EventTypeWarning, "CallerSecretsSkipped", "Reconcile",
			"%d per-caller Secrets are not used: %s", len(skipped), listAtMost(skipped, 10, "; "))
	}
}

// announceNotRelayed tells, once per change, which imported tools are left out because
// their remote lists them only to clients with capabilities the import does not relay
// (ImportedToolsServable names them too).
func (r *SkillServerReconciler) announceNotRelayed(ss *cantusv1alpha1.SkillServer, tools []string) {
	if !listChanged(&r.notRelayedTools, client.ObjectKeyFromObject(ss), tools) {
		return
	}
	if len(tools) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(ss, nil, corev1.EventTypeWarning, cantusv1alpha1.ReasonCapabilitiesNotRelayed, "Reconcile",
			"%d imported tools are not served: their remotes list them only to clients with capabilities spec.imports[].relay does not relay: %s",
			len(tools), listAtMost(tools, 10, "; "))
	}
}

// listChanged records a digest of list as the one last announced for key in last, and
// says whether it differs from the one announced before; a first list that is empty is
// no change.
func listChanged(last *sync.Map, key types.NamespacedName, list []string) bool {
	sum := sha256.Sum256([]byte(strings.Join(list, "\n")))
	digest := hex.EncodeToString(sum[:8])
	previous, _ := last.Swap(key, digest)
	return previous != digest && (previous != nil || len(list) > 0)
}

// setCallerCredentialsReady says whether the gateway can act for its callers at every
// import it serves with spec.callerCredentials; absent when none has any.
func setCallerCredentialsReady(ss *cantusv1alpha1.SkillServer, report render.Imports, keys callerKeys) {
	switch {
	case !report.CallerCredentials:
		removeCondition(ss, cantusv1alpha1.ConditionCallerCredentialsReady)
	case len(report.CallerCredentialsRefused) > 0:
		messages := make([]string, 0, len(report.CallerCredentialsRefused))
		for _, refusal := range report.CallerCredentialsRefused {
			messages = append(messages, refusal.Message)
		}
		setCondition(ss, cantusv1alpha1.ConditionCallerCredentialsReady, metav1.ConditionFalse, report.CallerCredentialsRefused[0].Reason,
			"not served: "+listAtMost(messages, 5, "; "))
	case keys.tooLarge != "":
		setCondition(ss, cantusv1alpha1.ConditionCallerCredentialsReady, metav1.ConditionFalse, cantusv1alpha1.ReasonCallerKeysTooLarge, keys.tooLarge)
	default:
		msg := "every import with spec.callerCredentials is served with its callers' own credentials"
		if len(report.PerCallerSecret) > 0 {
			msg += fmt.Sprintf("; %d per-caller credentials in Secret %s", len(keys.data), render.CallerKeysSecretName(ss.Name))
		}
		if len(keys.skipped) > 0 {
			msg += fmt.Sprintf("; %d per-caller Secrets are not used (see the CallerSecretsSkipped event)", len(keys.skipped))
		}
		setCondition(ss, cantusv1alpha1.ConditionCallerCredentialsReady, metav1.ConditionTrue, cantusv1alpha1.ReasonCallerCredentialsReady, msg)
	}
}

// serversUsingCallerSecret are the servers in a per-caller Secret's namespace that
// re-export the import its label names.
func (r *SkillServerReconciler) serversUsingCallerSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	name, ok := secret.GetLabels()[cantusv1alpha1.LabelCallerCredentialsFor]
	if !ok || name == "" {
		return nil
	}
	return r.serversIndexed(ctx, secret, importRefIndex, name, "that re-export an import")
}

// serversOfCaller are the servers that gather a per-caller Secret naming the service
// account: its UID is part of the caller's identity, so a recreated account changes
// the key's name.
func (r *SkillServerReconciler) serversOfCaller(ctx context.Context, sa client.Object) []reconcile.Request {
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.metadataReader().List(ctx, secrets, client.HasLabels{cantusv1alpha1.LabelCallerCredentialsFor}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list per-caller Secrets")
		return nil
	}
	want := callerServiceAccountPrefix + sa.GetNamespace() + "/" + sa.GetName()
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if s.Annotations[cantusv1alpha1.AnnotationCaller] != want {
			continue
		}
		for _, req := range r.serversUsingCallerSecret(ctx, s) {
			if !seen[req.NamespacedName] {
				seen[req.NamespacedName] = true
				out = append(out, req)
			}
		}
	}
	return out
}
