package operatorpower

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// readRules reads the rules of the Role or ClusterRole in a file of config/rbac.
func readRules(t *testing.T, path ...string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{root, "config", "rbac"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	var role struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// grant is one thing a rule allows: a verb on a group's resource, or on a URL.
type grant struct{ group, resource, url, verb string }

func (g grant) String() string {
	if g.url != "" {
		return g.verb + " " + g.url
	}
	if g.group == "" {
		return g.verb + " " + g.resource
	}
	return g.verb + " " + g.resource + "." + g.group
}

// grants expands rules into single grants.
func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				out[grant{url: url, verb: verb}] = true
			}
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					out[grant{group: group, resource: resource, verb: verb}] = true
				}
			}
		}
	}
	return out
}

func names(set map[grant]bool) string {
	var out []string
	for g := range set {
		out = append(out, g.String())
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// The namespaced Role and the cluster-scoped ClusterRole of --watch-namespaces mode grant,
// together, exactly what controller-gen's ClusterRole grants (so a new RBAC marker must
// land in one of them), and each holds only kinds of its scope, as the API server says.
func TestNamespacedRolesSplitTheClusterRole(t *testing.T) {
	whole := grants(readRules(t, "role.yaml"))
	namespaced := grants(readRules(t, "namespaced", "role.yaml"))
	clusterScoped := grants(readRules(t, "namespaced", "cluster", "cluster_role.yaml"))

	union := maps.Clone(namespaced)
	maps.Copy(union, clusterScoped)
	missing, extra := map[grant]bool{}, map[grant]bool{}
	for g := range whole {
		if !union[g] {
			missing[g] = true
		}
	}
	for g := range union {
		if !whole[g] {
			extra[g] = true
		}
	}
	if len(missing) > 0 {
		t.Errorf("config/rbac/role.yaml grants what config/rbac/namespaced does not: %s", names(missing))
	}
	if len(extra) > 0 {
		t.Errorf("config/rbac/namespaced grants what config/rbac/role.yaml does not: %s", names(extra))
	}

	httpClient, err := rest.HTTPClientFor(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(adminCfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	scope := func(g grant) meta.RESTScopeName {
		resource, _, _ := strings.Cut(g.resource, "/") // a subresource has its resource's scope
		gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: g.group, Resource: resource})
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		return mapping.Scope.Name()
	}
	for g := range namespaced {
		if g.url != "" || scope(g) != meta.RESTScopeNameNamespace {
			t.Errorf("the namespaced Role grants %s, which is not namespaced: a Role cannot grant it", g)
		}
	}
	for g := range clusterScoped {
		if g.url == "" && scope(g) != meta.RESTScopeNameRoot {
			t.Errorf("the ClusterRole of --watch-namespaces mode grants %s in every namespace", g)
		}
	}
}
