package render

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// A gateway calls a stdio import's bridge with the bridge's token: an Authorization
// header read from the bridge's Secret (<import>-bridge, key authorization), the same
// way it reads any header of an import. A tenant's own Authorization header on a stdio
// import does not replace it (R8).
func TestGatewaySendsTheBridgeTokenToAStdioImport(t *testing.T) {
	child := readyImportOf("child", "run")
	child.Spec.Transport = cantusv1alpha1.ImportTransportStdio
	child.Status.BridgeURL = "http://10.96.0.9:8765/mcp"
	child.Spec.Headers = []cantusv1alpha1.HeaderFromSecret{
		{Name: "authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "mine", Key: "value"}},
		{Name: "X-Trace", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "mine", Key: "trace"}},
	}
	plain := readyImportOf("plain", "get")
	plain.Spec.Headers = []cantusv1alpha1.HeaderFromSecret{{Name: "Authorization", ValueFrom: cantusv1alpha1.SecretKeyRef{Name: "api", Key: "token"}}}
	ss := &cantusv1alpha1.SkillServer{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "books"}}
	ss.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "child"}, {Name: "plain"}}
	out := reexport(ss, map[string]*cantusv1alpha1.RemoteToolImport{"child": child, "plain": plain}, nil)

	bySecretKey := map[string]File{}
	for _, f := range out.files {
		bySecretKey[f.Secret+"/"+f.Key] = f
	}
	token, ok := bySecretKey["child-bridge/"+BridgeAuthorizationKey]
	if !ok {
		t.Fatalf("no file from the bridge's Secret: %+v", out.files)
	}
	if _, ok := bySecretKey["mine/value"]; ok {
		t.Errorf("the tenant's Authorization header of a stdio import is still projected: %+v", out.files)
	}
	if _, ok := bySecretKey["api/token"]; !ok {
		t.Errorf("the Authorization header of an http import was dropped: %+v", out.files)
	}
	for _, tool := range out.tools {
		headers := tool.Remote.HeaderFiles
		switch tool.Name {
		case "run":
			if len(headers) != 2 || headers["Authorization"] != token.Path || headers["X-Trace"] == "" {
				t.Errorf("the stdio import's headers %v, want Authorization from %s and X-Trace", headers, token.Path)
			}
		case "get":
			if headers["Authorization"] != bySecretKey["api/token"].Path {
				t.Errorf("the http import's headers %v", headers)
			}
		}
	}
}

func TestBridgeNameIsADNSLabel(t *testing.T) {
	for _, name := range []string{"acme", "1password", "a.b.c", "very-long-import-name-that-goes-on-and-on-past-the-sixty-three-limit"} {
		got := BridgeName(name)
		if len(got) > 63 || got[0] < 'a' || got[0] > 'z' {
			t.Errorf("BridgeName(%q) = %q", name, got)
		}
	}
	if BridgeName("acme") != "acme-bridge" {
		t.Errorf("BridgeName(acme) = %q", BridgeName("acme"))
	}
}
