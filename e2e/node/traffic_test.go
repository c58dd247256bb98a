package node

import "testing"

// TestCaseTable checks the case table: unique names, a function each,
// skips keyed by known kernels.
func TestCaseTable(t *testing.T) {
	known := map[Kernel]bool{}
	for _, k := range Sinks {
		known[k] = true
	}
	seen := map[string]bool{}
	for _, c := range Cases {
		if c.Name == "" || seen[c.Name] || c.Run == nil {
			t.Errorf("case %q: duplicate, unnamed or without a function", c.Name)
		}
		seen[c.Name] = true
		for k := range c.Skip {
			if !known[k] {
				t.Errorf("case %s skips kernel %q, which no sink programs", c.Name, k)
			}
		}
	}
}
