package operatorpower

import "testing"

// The operator writes a gateway's request state Secret, <server>-request-state
// controlled by that SkillServer, and under that name no other Secret.
func TestRequestStateKeys_OperatorWritesOnlyRequestStateSecretsOfItsServers(t *testing.T) {
	expectOnlyItsServersSecret(t, "tenant-request-state", "request-state")
}
