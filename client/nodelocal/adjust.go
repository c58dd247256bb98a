package nodelocal

import "fmt"

// Adjustment is one value of an API object that the conversion read
// differently from its text (repaired) or left out (skipped) while the
// rest of the object is served: kube-proxy v1.37.2's input rules (see
// docs/design/client.md, "Input rules"). A State logs each once and counts it
// (client.Stats.RepairedValuesTotal, SkippedValuesTotal).
type Adjustment struct {
	// Field is the JSON path of the value, e.g. "spec.externalIPs[1]".
	Field string
	// Value is the value as the object gives it.
	Value string
	// Skipped is true when the value is left out; false when it is served
	// as Result.
	Skipped bool
	// Result is the value as served (a repair), empty when skipped.
	Result string
	// Reason says why.
	Reason string
}

// String returns e.g. `spec.externalIPs[1] "192.0.2.052": served as
// 192.0.2.52 (leading zeros read as decimal)`.
func (a Adjustment) String() string {
	if a.Skipped {
		return fmt.Sprintf("%s %q: skipped (%s)", a.Field, a.Value, a.Reason)
	}
	return fmt.Sprintf("%s %q: served as %s (%s)", a.Field, a.Value, a.Result, a.Reason)
}

// adjustments collects the adjustments of one object's conversion; a nil
// *adjustments collects nothing.
type adjustments struct {
	list []Adjustment
}

// skip records a skipped value.
func (l *adjustments) skip(field, value, reason string) {
	if l != nil {
		l.list = append(l.list, Adjustment{Field: field, Value: value, Skipped: true, Reason: reason})
	}
}

// readAs records an unknown value read as result, as kube-proxy reads it.
func (l *adjustments) readAs(field, value, result, reason string) {
	if l != nil {
		l.list = append(l.list, Adjustment{Field: field, Value: value, Result: result, Reason: reason})
	}
}

// repaired records a value served as result, when r says it was
// repaired. Callers test r first where it is hot: result is boxed.
func (l *adjustments) repaired(field, value string, result fmt.Stringer, r repair) {
	if l != nil && r.any() {
		l.list = append(l.list, Adjustment{Field: field, Value: value, Result: result.String(), Reason: r.String()})
	}
}
