package workload

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

func TestHoldsRequest(t *testing.T) {
	request := corev1ac.ConfigMap("books-adapter", "ns").
		WithLabels(map[string]string{LabelManagedBy: FieldOwner}).
		WithData(map[string]string{"adapter.json": `{"tools":[]}`})
	data, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	live := func(edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "books-adapter", Namespace: "ns", ResourceVersion: "7",
				Labels: map[string]string{LabelManagedBy: FieldOwner, "added-by": "someone-else"}},
			Data: map[string]string{"adapter.json": `{"tools":[]}`},
		}
		edit(cm)
		return cm
	}
	tests := []struct {
		name string
		live *corev1.ConfigMap
		want bool
	}{
		{"as applied, with fields others added", live(func(*corev1.ConfigMap) {}), true},
		{"a value of ours changed", live(func(cm *corev1.ConfigMap) { cm.Data["adapter.json"] = "{}" }), false},
		{"a label of ours removed", live(func(cm *corev1.ConfigMap) { delete(cm.Labels, LabelManagedBy) }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holdsRequest(tt.live, data); got != tt.want {
				t.Errorf("holdsRequest = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestContainsLists(t *testing.T) {
	have := []any{map[string]any{"name": "a", "image": "x", "defaulted": true}}
	if !contains(have, []any{map[string]any{"name": "a", "image": "x"}}) {
		t.Error("a list item with defaulted fields besides ours should hold the request")
	}
	if contains(have, []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}) {
		t.Error("a list missing an item of ours should not hold the request")
	}
}

// An object the request's controller does not control is never written (issue 23,
// finding 2): no controller, or another one, is a NameConflictError naming the object.
func TestForeignObjectsAreNameConflicts(t *testing.T) {
	request, err := json.Marshal(corev1ac.ConfigMap("books-adapter", "ns").
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("cantus.dev/v1alpha1").WithKind("SkillServer").
			WithName("books").WithUID("uid-books").WithController(true)))
	if err != nil {
		t.Fatal(err)
	}
	owner := controllerUIDOf(request)
	if owner != "uid-books" {
		t.Fatalf("controller UID of the request = %q", owner)
	}
	isController := true
	object := func(refs ...metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "books-adapter", Namespace: "ns", OwnerReferences: refs}}
	}
	tests := []struct {
		name     string
		obj      *corev1.ConfigMap
		conflict string
	}{
		{"ours", object(metav1.OwnerReference{Kind: "SkillServer", Name: "books", UID: "uid-books", Controller: &isController}), ""},
		{"nobody's", object(), "no controller"},
		{"another SkillServer's", object(metav1.OwnerReference{Kind: "SkillServer", Name: "books", UID: "uid-old", Controller: &isController}), "controller SkillServer books"},
		{"owned but not controlled by us", object(metav1.OwnerReference{Kind: "SkillServer", Name: "books", UID: "uid-books"}), "no controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := refuseForeign("ConfigMap", tt.obj, owner)
			if tt.conflict == "" {
				if err != nil {
					t.Fatalf("refused its own object: %v", err)
				}
				return
			}
			var conflict *NameConflictError
			if !errors.As(err, &conflict) || !strings.Contains(err.Error(), tt.conflict) || !strings.Contains(err.Error(), "ConfigMap ns/books-adapter") {
				t.Fatalf("err = %v, want a NameConflictError with %q", err, tt.conflict)
			}
		})
	}
}
