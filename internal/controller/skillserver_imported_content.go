package controller

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/render"
)

// setImportedContentServed says what a gateway serves of its imports' prompts,
// resources and resource templates, and which it leaves out: collisions first (two
// imports, or an import and the server, serving one URI or prompt name), as
// ToolNamesUnique reports them for tools.
func setImportedContentServed(ss *cantusv1alpha1.SkillServer, report render.ContentReport) {
	nothing := report.Prompts+report.Resources+report.ResourceTemplates+report.Skills+len(report.Collisions)+len(report.Skipped)+len(report.Withheld) == 0
	if len(ss.Spec.Imports) == 0 || nothing {
		// A gateway of tools alone keeps the status it had.
		removeCondition(ss, cantusv1alpha1.ConditionImportedContentServed)
		return
	}
	served := fmt.Sprintf("%d imported prompts, %d resources, %d resource templates and %d skills served", report.Prompts, report.Resources, report.ResourceTemplates, report.Skills)
	if len(report.Withheld) > 0 {
		// A held change is no failure of the gateway: it serves what is approved.
		served += fmt.Sprintf("; %d withheld until their imports' owners approve their new or changed definitions (see the imports' DefinitionsApproved): %s",
			len(report.Withheld), listAtMost(report.Withheld, 10, "; "))
	}
	var left []string
	if len(report.Collisions) > 0 {
		left = append(left, fmt.Sprintf("left out because their name or URI collides (a prompt takes spec.imports[].prefix or renames; a resource keeps its URI, so filter it at one import with spec.resources): %s",
			listAtMost(report.Collisions, 10, "; ")))
	}
	if len(report.Skipped) > 0 {
		left = append(left, "left out because they cannot be served as listed: "+listAtMost(report.Skipped, 10, "; "))
	}
	switch {
	case len(report.Collisions) > 0:
		setCondition(ss, cantusv1alpha1.ConditionImportedContentServed, metav1.ConditionFalse, cantusv1alpha1.ReasonNameCollision, served+"; "+strings.Join(left, "; "))
	case len(report.Skipped) > 0:
		setCondition(ss, cantusv1alpha1.ConditionImportedContentServed, metav1.ConditionFalse, cantusv1alpha1.ReasonContentSkipped, served+"; "+strings.Join(left, "; "))
	default:
		setCondition(ss, cantusv1alpha1.ConditionImportedContentServed, metav1.ConditionTrue, cantusv1alpha1.ReasonContentServed, served)
	}
}
