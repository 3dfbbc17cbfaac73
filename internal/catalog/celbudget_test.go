package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// squareOverLiterals costs 61,711 CEL units per evaluation (estimated at most 91,411, so
// it compiles), whatever the caller's claims.
func squareOverLiterals() string {
	nums := make([]string, 100)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	l := "[" + strings.Join(nums, ",") + "]"
	return l + ".all(i, " + l + ".all(j, i != j || i == j))"
}

// One catalog request spends at most 1,000,000 CEL units on the servers' rules: past
// that the remaining tools are left out (fail closed) and the response says so in
// Cantus-Catalog-Incomplete; decisions made are remembered per caller and server
// generation, so the next request goes on where this one stopped (issue 23 #1). Before,
// every request evaluated all 40 tools × the rule, 2,468,440 units, every time.
func TestCatalogRequestsSpendABoundedCELBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "cel-budget")
	ss := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "costly"},
		Spec: cantusv1alpha1.SkillServerSpec{
			Auth: &cantusv1alpha1.AuthSpec{ServiceAccountTokens: &cantusv1alpha1.ServiceAccountTokenAuth{}},
			Authorization: &cantusv1alpha1.AuthorizationSpec{Rules: []cantusv1alpha1.AuthorizationRule{
				{Tools: []string{"*"}, When: squareOverLiterals()},
			}},
		},
	}
	for i := range 40 {
		ss.Spec.Skills = append(ss.Spec.Skills, cantusv1alpha1.Skill{Name: fmt.Sprintf("tool_%02d", i), Template: &cantusv1alpha1.TemplateBackend{Text: "x"}})
	}
	g.Expect(k8sClient.Create(ctx, ss)).To(Succeed())
	for _, s := range ss.Spec.Skills {
		ss.Status.Tools = append(ss.Status.Tools, cantusv1alpha1.ServedTool{Name: s.Name, Source: "skill"})
	}
	g.Expect(k8sClient.Status().Update(ctx, ss)).To(Succeed())
	token := serviceAccountAllowedIn(t, ns, "agent")

	srv := httptest.NewTLSServer(NewHandler(&Catalog{Reader: k8sClient}, &Authorizer{Client: k8sClient}, logr.Discard()))
	t.Cleanup(srv.Close)
	listTools := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/servers/"+ns+"/costly", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		var s Server
		g.Expect(json.NewDecoder(resp.Body).Decode(&s)).To(Succeed())
		return len(s.Tools), resp.Header.Get(HeaderIncomplete)
	}

	// 16 evaluations spend 987,376 units; the 17th starts within the budget; then none.
	perRequest := catalogCELBudget/61711 + 1
	n, incomplete := listTools()
	g.Expect(n).To(Equal(perRequest))
	g.Expect(incomplete).To(ContainSubstring("1000000 units"))
	n, incomplete = listTools()
	g.Expect(n).To(Equal(2*perRequest), "the first request's decisions are remembered")
	g.Expect(incomplete).NotTo(BeEmpty())
	n, incomplete = listTools()
	g.Expect(n).To(Equal(40))
	g.Expect(incomplete).To(BeEmpty())
}
