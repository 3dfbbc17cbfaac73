package render

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

func TestAppViewReadsBothSpellingsAndNothingElse(t *testing.T) {
	for _, tc := range []struct{ other, want string }{
		{`{"_meta":{"ui":{"resourceUri":"ui://a/v.html"}}}`, "ui://a/v.html"},
		{`{"_meta":{"ui/resourceUri":"ui://a/flat.html"}}`, "ui://a/flat.html"},
		{`{"_meta":{"ui":{"resourceUri":"ui://a/v.html"},"ui/resourceUri":"ui://a/flat.html"}}`, "ui://a/v.html"},
		{`{"_meta":{"ui":"ui://a/string.html"}}`, ""},
		{`{"_meta":{"ui/resourceUri":7}}`, ""},
		{`{"_meta":[]}`, ""},
		{`{"icons":[{"src":"https://x/i.svg"}]}`, ""},
		{``, ""},
	} {
		d := cantusv1alpha1.DiscoveredTool{Name: "t"}
		if tc.other != "" {
			d.OtherFields = &runtime.RawExtension{Raw: []byte(tc.other)}
		}
		if got := appView(d); got != tc.want {
			t.Errorf("appView(%s) = %q, want %q", tc.other, got, tc.want)
		}
	}
}
