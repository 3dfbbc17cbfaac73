package v1alpha1

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Duration is a length of time written as Go and CEL write it: "30s", "5m", "1h30m".
//
// It is a plain string, not metav1.Duration, on purpose: a value that does not parse
// (one stored before a validation existed, or written around it) must still decode. A
// decoding error would make the manager unable to list the kind at all, so one object
// would stop reconciliation in every namespace. Parse reports it for that object only.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="must be a duration such as \"30s\", \"5m\" or \"1h30m\" (units ns, us, ms, s, m, h; no sign, no spaces)"
type Duration string

// durationPattern mirrors the CEL rule on Duration, so that values stored before the
// rule existed are judged the same way.
var durationPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`)

// Parse returns the duration, or an error that says how to write one.
func (d Duration) Parse() (time.Duration, error) {
	if len(d) > 32 || !durationPattern.MatchString(string(d)) {
		return 0, fmt.Errorf("%q is not a duration: write one such as \"30s\", \"5m\" or \"1h30m\"", clip(string(d)))
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: %w", clip(string(d)), err)
	}
	return v, nil
}

// Bounded parses d and checks it lies in [lo, hi].
func (d Duration) Bounded(lo, hi time.Duration) (time.Duration, error) {
	v, err := d.Parse()
	if err != nil {
		return 0, err
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%s is out of range: it must be between %s and %s", d, lo, hi)
	}
	return v, nil
}

// DurationOf returns the parsed value of d, or def when d is unset or invalid. Specs are
// checked for problems before they are used, so def is only reached for unset fields.
func DurationOf(d *Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	v, err := d.Parse()
	if err != nil {
		return def
	}
	return v
}

// DurationFrom writes t the way Duration reads it, for objects built in Go.
func DurationFrom(t time.Duration) *Duration {
	d := Duration(t.String())
	return &d
}

// Quantity is a storage size in plain notation: "1Gi", "500Mi", "2G", "1073741824".
//
// Like Duration it is a string so that a bad stored value never breaks decoding. The
// exponent notations of resource.Quantity ("1e3") are not accepted: parsing an extreme
// exponent such as "1e-99999999999" takes unbounded time.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=24
// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+(\\\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$') && !self.matches('^[0.]+[A-Za-z]*$')",message="must be a positive size such as \"1Gi\", \"500Mi\" or \"2G\" (binary suffixes Ki Mi Gi Ti Pi, decimal k M G T P; no exponent)"
type Quantity string

var quantityPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$`)

// Parse returns the quantity, or an error that says how to write one.
func (q Quantity) Parse() (resource.Quantity, error) {
	if len(q) > 24 || !quantityPattern.MatchString(string(q)) {
		return resource.Quantity{}, fmt.Errorf("%q is not a size: write one such as \"1Gi\" or \"500Mi\"", clip(string(q)))
	}
	v, err := resource.ParseQuantity(string(q))
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a size: %w", clip(string(q)), err)
	}
	if v.Sign() <= 0 {
		return resource.Quantity{}, fmt.Errorf("%q must be greater than zero", q)
	}
	return v, nil
}

// clip keeps an invalid value short enough to quote in a condition message.
func clip(s string) string {
	const limit = 40
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}
