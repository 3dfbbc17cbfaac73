package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the admission policy's parameters (config/admission/params.yaml) that the
// operator reads, so that it refuses what the API server would refuse before it writes
// anything: a Deployment the policy denies would otherwise be a rollout that never ends.
const (
	admissionServiceAccountsKey = "serviceAccounts"
	admissionBridgeImagesKey    = "bridgeImages"
)

// defaultAdmissionServiceAccounts are the service accounts the policy allows when its
// parameters do not list any (the same default as the policy's own).
var defaultAdmissionServiceAccounts = []string{"*/default"}

// admissionParamsTTL is how long a read of the parameters is used: they change when the
// admin edits them, and each SkillServer reconcile would otherwise read them again.
const admissionParamsTTL = 10 * time.Second

// AdmissionParams reads the parameters of the admission policy that bounds the operator
// (the ConfigMap Key, which the operator may read and not write).
type AdmissionParams struct {
	// Reader reads the ConfigMap from the API server (the manager's cache holds only the
	// operator's labelled ConfigMaps).
	Reader client.Reader
	Key    types.NamespacedName
	// MaxAge is how long a read is used; admissionParamsTTL when zero.
	MaxAge time.Duration

	mu     sync.Mutex
	readAt time.Time
	data   map[string]string
	found  bool
}

// AdmissionRefusal says why the admission policy would refuse a workload, naming the
// parameter an admin would change.
type AdmissionRefusal struct{ Message string }

func (p *AdmissionParams) read(ctx context.Context) (map[string]string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	maxAge := p.MaxAge
	if maxAge == 0 {
		maxAge = admissionParamsTTL
	}
	if !p.readAt.IsZero() && time.Since(p.readAt) < maxAge {
		return p.data, p.found, nil
	}
	cm := &corev1.ConfigMap{}
	err := p.Reader.Get(ctx, p.Key, cm)
	switch {
	case apierrors.IsNotFound(err):
		p.data, p.found = nil, false
	case err != nil:
		return nil, false, fmt.Errorf("read the admission policy's parameters %s: %w", p.Key, err)
	default:
		p.data, p.found = cm.Data, true
	}
	p.readAt = time.Now()
	return p.data, p.found, nil
}

// list splits a parameter the way the policy does: comma-separated, trimmed, blanks dropped.
func list(value string) []string {
	var out []string
	for item := range strings.SplitSeq(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// CheckServiceAccount returns a refusal when the policy would not let pods of namespace
// run under account, nil when it would.
func (p *AdmissionParams) CheckServiceAccount(ctx context.Context, namespace, account string) (*AdmissionRefusal, error) {
	data, found, err := p.read(ctx)
	if err != nil || !found {
		return p.missing(found), err
	}
	patterns := defaultAdmissionServiceAccounts
	if value, ok := data[admissionServiceAccountsKey]; ok {
		patterns = list(value)
	}
	if slices.ContainsFunc(patterns, func(pattern string) bool { return serviceAccountMatches(pattern, namespace, account) }) {
		return nil, nil
	}
	return &AdmissionRefusal{Message: fmt.Sprintf(
		"service account %s/%s is not in %s of the operator's admission policy parameters %s (%q), so the API server would refuse its pods; the cluster admin adds it there",
		namespace, account, admissionServiceAccountsKey, p.Key, strings.Join(patterns, ","))}, nil
}

// CheckBridgeImage returns a refusal when the policy would not let a stdio bridge run
// image, nil when it would.
func (p *AdmissionParams) CheckBridgeImage(ctx context.Context, image string) (*AdmissionRefusal, error) {
	data, found, err := p.read(ctx)
	if err != nil || !found {
		return p.missing(found), err
	}
	images := list(data[admissionBridgeImagesKey])
	if slices.ContainsFunc(images, func(prefix string) bool { return bridgeImageMatches(prefix, image) }) {
		return nil, nil
	}
	return &AdmissionRefusal{Message: fmt.Sprintf(
		"image %s is not in %s of the operator's admission policy parameters %s (%q), so the API server would refuse its stdio bridge; the cluster admin adds it there",
		image, admissionBridgeImagesKey, p.Key, strings.Join(images, ","))}, nil
}

func (p *AdmissionParams) missing(found bool) *AdmissionRefusal {
	if found {
		return nil
	}
	return &AdmissionRefusal{Message: fmt.Sprintf(
		"the operator's admission policy parameters %s do not exist, so the API server refuses every workload the operator writes", p.Key)}
}

// serviceAccountMatches is the policy's match of a namespace/name pattern, either part
// of which may be *.
func serviceAccountMatches(pattern, namespace, account string) bool {
	ns, name, ok := strings.Cut(pattern, "/")
	if !ok || strings.Contains(name, "/") {
		return false
	}
	return (ns == "*" || ns == namespace) && (name == "*" || name == account)
}

// bridgeImageMatches is the policy's match of an image: *, the image itself, or a prefix
// of it that ends at a path, tag or digest boundary.
func bridgeImageMatches(prefix, image string) bool {
	if prefix == "*" || image == prefix {
		return true
	}
	rest, ok := strings.CutPrefix(image, prefix)
	return ok && rest != "" && strings.ContainsRune("/:@", rune(rest[0]))
}
