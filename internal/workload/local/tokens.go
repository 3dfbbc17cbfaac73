package local

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/periodic"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// localTokenSeconds is the lifetime asked for a token the local runtime mints where the
// kubelet would project one; it is minted again when less than half is left.
const localTokenSeconds = 3600

// tokenRefreshEvery is how often minted tokens are looked at for renewal.
const tokenRefreshEvery = time.Minute

// mintedToken is a service-account token written to a file on this host, as the
// kubelet keeps a projected token: renewed before it expires.
type mintedToken struct {
	namespace, account, audience string
	token                        string
	renewAt                      time.Time
	onHost                       string
}

// tokens are the tokens minted for the local adapters, by their path on this host.
type tokens struct {
	mu     sync.Mutex
	byPath map[string]*mintedToken
}

// MintToken asks the API server for a token of namespace/account for audience
// (TokenRequest), valid for seconds.
func MintToken(c client.Client) func(ctx context.Context, namespace, account, audience string, seconds int64) (string, time.Time, error) {
	return func(ctx context.Context, namespace, account, audience string, seconds int64) (string, time.Time, error) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: account}}
		req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &seconds}}
		if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
			return "", time.Time{}, fmt.Errorf("request a token of service account %s/%s: %w", namespace, account, err)
		}
		return req.Status.Token, req.Status.ExpirationTimestamp.Time, nil
	}
}

// serviceAccountOf is the service account a SkillServer's pods would run as.
func serviceAccountOf(ss *cantusv1alpha1.SkillServer) string {
	if ss.Spec.Pod != nil && ss.Spec.Pod.ServiceAccountName != "" {
		return ss.Spec.Pod.ServiceAccountName
	}
	return "default"
}

// token is the token of the server's service account for audience, minted again when
// half its life has passed; the file it goes to on this host is remembered, for renewal.
func (l *Runtime) token(ctx context.Context, key types.NamespacedName, account string, f render.File) ([]byte, error) {
	onHost := filepath.Join(l.MemoryDir, ".imports", key.Namespace, key.Name, strings.TrimPrefix(f.Path, render.ImportFilesDir+"/"))
	l.tokens.mu.Lock()
	defer l.tokens.mu.Unlock()
	if l.tokens.byPath == nil {
		l.tokens.byPath = map[string]*mintedToken{}
	}
	if t := l.tokens.byPath[onHost]; t != nil && t.account == account && t.audience == f.ServiceAccountTokenAudience && time.Now().Before(t.renewAt) {
		return []byte(t.token), nil
	}
	token, expiry, err := l.MintToken(ctx, key.Namespace, account, f.ServiceAccountTokenAudience, localTokenSeconds)
	if err != nil {
		return nil, err
	}
	l.tokens.byPath[onHost] = &mintedToken{namespace: key.Namespace, account: account, audience: f.ServiceAccountTokenAudience,
		token: token, renewAt: time.Now().Add(time.Until(expiry) / 2), onHost: onHost}
	return []byte(token), nil
}

// renewTokens mints again, and rewrites, the tokens past half their life, until ctx
// ends; the adapters read the files at every use.
func (l *Runtime) renewTokens(ctx context.Context) {
	periodic.Run(ctx, tokenRefreshEvery, func() { l.renewDueTokens(ctx) })
}

func (l *Runtime) renewDueTokens(ctx context.Context) {
	l.tokens.mu.Lock()
	due := []*mintedToken{}
	for _, t := range l.tokens.byPath {
		if !time.Now().Before(t.renewAt) {
			due = append(due, t)
		}
	}
	l.tokens.mu.Unlock()
	for _, t := range due {
		token, expiry, err := l.MintToken(ctx, t.namespace, t.account, t.audience, localTokenSeconds)
		if err == nil {
			err = writeFileAtomically(t.onHost, []byte(token))
		}
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "renew a local adapter's service-account token", "namespace", t.namespace, "serviceAccount", t.account)
			continue
		}
		l.tokens.mu.Lock()
		t.token, t.renewAt = token, time.Now().Add(time.Until(expiry)/2)
		l.tokens.mu.Unlock()
	}
}
