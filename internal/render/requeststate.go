package render

import (
	"path"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// A gateway seals the requestState it gives a caller of protocol 2026-07-28 whose call
// a remote answered with an input request; the caller's retry may reach any replica,
// so every replica reads the same keys from a Secret the operator makes for the
// gateway and controls (one per SkillServer: it goes with its server, and one
// gateway's key opens no other gateway's states).

// RequestStateKeysKey is the key of the request state Secret that holds the keys, one
// per line, the first sealing (adapterconfig.Config.RequestStateKeyFile).
const RequestStateKeysKey = "keys"

// RequestStateKeyFile is where a gateway reads its request state keys: a file of its
// projected import files, so that the kubelet brings a rotated key without a change
// of the pod template.
var RequestStateKeyFile = path.Join(ImportFilesDir, "_request-state", RequestStateKeysKey)

// RequestStateSecretName is the Secret, in the gateway's namespace and controlled by
// it, that holds the keys of its request states.
func RequestStateSecretName(server string) string { return server + "-request-state" }

// NeedsRequestStateKeys says whether ss re-exports imports, whose remotes may answer a
// call with an input request: a gateway, whatever its imports resolve to right now, so
// that the Secret and the pod template do not come and go with an import's readiness.
func NeedsRequestStateKeys(ss *cantusv1alpha1.SkillServer) bool { return len(ss.Spec.Imports) > 0 }

// requestStateKeys points the gateway's config at its request state keys and returns
// the file that holds them; nothing for a server that is no gateway.
func requestStateKeys(ss *cantusv1alpha1.SkillServer, cfg *adapterconfig.Config) []File {
	if !NeedsRequestStateKeys(ss) {
		return nil
	}
	cfg.RequestStateKeyFile = RequestStateKeyFile
	return []File{{Path: RequestStateKeyFile, Secret: RequestStateSecretName(ss.Name), Key: RequestStateKeysKey}}
}
