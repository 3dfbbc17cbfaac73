package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cantus-dev/cantus-operator/internal/access"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/callercred"
)

// maxCallerKeyBytes bounds a per-caller key file; the operator refuses larger values.
const maxCallerKeyBytes = 16 << 10

// newCredentialSource returns the source cfg names.
func newCredentialSource(importRef string, cfg *adapterconfig.CallerCredentials, tokens *callercred.Cache, metrics *callercred.Metrics) (CredentialSource, error) {
	switch {
	case cfg.PerCallerSecret != nil:
		return &callerKeyFiles{importRef: importRef, cfg: cfg.PerCallerSecret}, nil
	case cfg.TokenExchange != nil:
		return newExchangeSource(importRef, cfg.TokenExchange, tokens, metrics)
	case cfg.Connect != nil:
		return newConnectSource(importRef, cfg.Connect, tokens, metrics)
	default:
		return nil, fmt.Errorf("import %s: callerCredentials names none of tokenExchange, perCallerSecret and connect", importRef)
	}
}

// callerKeyFiles reads each caller's key from the directory the operator keeps from the
// per-caller Secrets (one file per caller, named by a digest of import and caller). It
// caches nothing: the kubelet's update of the directory is seen by the next call.
type callerKeyFiles struct {
	importRef string
	cfg       *adapterconfig.PerCallerSecret
}

func (f *callerKeyFiles) Credential(_ context.Context, caller *access.Caller) (string, error) {
	name := filepath.Join(f.cfg.Dir, adapterconfig.CallerKeyFileName(f.importRef, caller.Identity()))
	data, err := readBounded(name, maxCallerKeyBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", f.missing(caller, "there is none")
	case err != nil:
		return "", &CallerCredentialError{Code: CodeCallerCredentialsMissing, Message: fmt.Sprintf(
			"the gateway cannot read this caller's key for import %s: %s", f.importRef, err.Error())}
	}
	value := strings.TrimSpace(string(data))
	if value == "" {
		return "", f.missing(caller, "the one found is empty")
	}
	return value, nil
}

// missing says exactly which Secret the caller needs.
func (f *callerKeyFiles) missing(caller *access.Caller, why string) error {
	return &CallerCredentialError{Code: CodeCallerCredentialsMissing, Message: fmt.Sprintf(
		"import %s sends each caller's own key to the remote, and for this caller %s: create a Secret in namespace %s "+
			"labelled %s, annotated cantus.dev/caller=%s, holding the key under %q (a new or changed Secret reaches the gateway within about two minutes); nothing was sent to the remote",
		f.importRef, why, f.cfg.Namespace, f.cfg.Label, callerAnnotation(caller), f.cfg.Key)}
}

func (f *callerKeyFiles) Forget(string) {}

// callerAnnotation is how a per-caller Secret names caller: its service account
// without the UID (the operator binds it to the account's current UID), or its OIDC
// issuer and subject.
func callerAnnotation(caller *access.Caller) string {
	if caller.ServiceAccount != "" {
		return "serviceaccount:" + caller.ServiceAccount
	}
	return caller.Identity()
}

func readBounded(name string, limit int64) ([]byte, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Base(name), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the key is over %d bytes", limit)
	}
	return data, nil
}
