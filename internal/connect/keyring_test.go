package connect

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// A key Secret created just after the operator found none is used at once, not after
// the whole refresh: the operator's first read may come before an administrator (or the
// demo) creates it.
func TestCallerCredentials_ConnectKeysCreatedAfterAMissingReadAreUsedAtOnce(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	keys := &Keys{Reader: c, Secret: types.NamespacedName{Namespace: "ops", Name: "connect-keys"}}
	if _, err := keys.Ring(ctx); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("no Secret yet: got %v, want ErrNoKeys", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "connect-keys"},
		Data: map[string][]byte{"k1": bytes.Repeat([]byte{7}, 32)}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the key ring created after a missing read to be used", func() bool {
		_, err := keys.Ring(ctx)
		return err == nil
	})
}
