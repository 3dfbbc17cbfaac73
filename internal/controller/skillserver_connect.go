package controller

import (
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// addConnectCA publishes the CA bundle the operator's connect endpoint is served with
// in the gateway's caller-keys Secret, for the gateways that re-export an import in
// connect mode: they trust only it when they fetch callers' tokens.
func (r *SkillServerReconciler) addConnectCA(report render.Imports, keys *callerKeys) {
	if len(report.Connect) == 0 || r.ConnectCA == nil {
		return
	}
	if ca := r.ConnectCA(); len(ca) > 0 {
		keys.data[render.ConnectCAKey] = ca
	}
}
