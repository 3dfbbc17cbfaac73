package connect

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// Sweeper keeps the store tidy, on the leader, every Every: it forgets the accounts of
// service accounts that no longer exist (or were recreated: a new UID is a new caller)
// and of imports that no longer exist or left connect mode, deletes expired connect
// links, and re-encrypts accounts with the newest key after a rotation.
type Sweeper struct {
	Store *Store
	// Reader reads service accounts' metadata.
	Reader client.Reader
	Every  time.Duration
	Log    logr.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one sweeper writes.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (s *Sweeper) Start(ctx context.Context) error {
	every := s.Every
	if every == 0 {
		every = 30 * time.Second
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.Log.Error(err, "sweep the connected accounts")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Sweep runs one round.
func (s *Sweeper) Sweep(ctx context.Context) error {
	list := &corev1.SecretList{}
	if err := s.Store.Client.List(ctx, list, client.InNamespace(s.Store.Namespace), client.HasLabels{LabelAccount}); err != nil {
		return err
	}
	ring, ringErr := s.Store.Keys.Ring(ctx)
	if ringErr != nil && !errors.Is(ringErr, ErrNoKeys) {
		return ringErr
	}
	existing := map[string]map[string]bool{} // namespace -> service-account UIDs
	imports := map[string]bool{}             // "namespace/name" -> in connect mode
	var errs []error
	forgotten, rotated := 0, 0
	for i := range list.Items {
		secret := &list.Items[i]
		switch {
		case s.callerGone(ctx, secret, existing), s.importGone(ctx, secret, imports):
			errs = append(errs, s.Store.forget(ctx, secret))
			forgotten++
		case secret.Labels[LabelAccount] == kindPending && expired(secret):
			errs = append(errs, s.Store.forget(ctx, secret))
		case ring != nil && secret.Labels[LabelAccount] == kindAccount && secret.Labels[LabelState] == StateConnected &&
			secret.Labels[LabelKey] != ring.Newest() && ring.Has(secret.Labels[LabelKey]) && secret.Annotations[annotationRefreshing] == "":
			if err := s.reencrypt(ctx, secret); err != nil {
				errs = append(errs, err)
				continue
			}
			rotated++
		}
	}
	if forgotten > 0 || rotated > 0 {
		s.Log.Info("swept the connected accounts", "forgotten", forgotten, "reencrypted", rotated)
	}
	return errors.Join(errs...)
}

// callerGone says whether the Secret belongs to a service account that no longer
// exists with its UID.
func (s *Sweeper) callerGone(ctx context.Context, secret *corev1.Secret, existing map[string]map[string]bool) bool {
	uid, namespace := secret.Labels[LabelCallerUID], secret.Labels[LabelCallerNamespace]
	if uid == "" || namespace == "" {
		return false
	}
	uids, ok := existing[namespace]
	if !ok {
		accounts := &metav1.PartialObjectMetadataList{}
		accounts.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccountList"))
		if err := s.Reader.List(ctx, accounts, client.InNamespace(namespace)); err != nil {
			s.Log.Error(err, "list service accounts")
			return false
		}
		uids = map[string]bool{}
		for _, a := range accounts.Items {
			uids[string(a.UID)] = true
		}
		existing[namespace] = uids
	}
	return !uids[uid]
}

// importGone says whether the account or pending connect belongs to an import that no
// longer exists or no longer uses connect mode: nothing can use it any more.
func (s *Sweeper) importGone(ctx context.Context, secret *corev1.Secret, imports map[string]bool) bool {
	namespace, name := secret.Labels[LabelImportNamespace], secret.Labels[LabelImport]
	if namespace == "" || name == "" {
		return false
	}
	ref := namespace + "/" + name
	connectMode, seen := imports[ref]
	if !seen {
		imp := &cantusv1alpha1.RemoteToolImport{}
		err := s.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, imp)
		switch {
		case apierrors.IsNotFound(err):
			connectMode = false
		case err != nil:
			s.Log.Error(err, "read an import of connected accounts")
			return false
		default:
			connectMode = imp.Spec.CallerCredentials != nil && imp.Spec.CallerCredentials.Connect != nil
		}
		imports[ref] = connectMode
	}
	return !connectMode
}

func expired(secret *corev1.Secret) bool {
	at, err := time.Parse(time.RFC3339, secret.Annotations[annotationExpires])
	return err == nil && time.Now().After(at)
}

// reencrypt seals the account again with the newest key, over the version read.
func (s *Sweeper) reencrypt(ctx context.Context, secret *corev1.Secret) error {
	var acct Account
	if err := s.Store.open(ctx, secret, &acct); err != nil {
		return nil //nolint:nilerr // unreadable: left to be counted as reconnect needed
	}
	return s.Store.save(ctx, &acct, secret)
}
