package differential

import (
	"path/filepath"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestModes checks the registry: every mode is named by its key, has
// sinks, a capture and shapes, and a differences file that parses; every
// sink has one mode.
func TestModes(t *testing.T) {
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range Modes {
		if m.Name != name || len(m.Sinks) == 0 || m.Capture == nil || m.Shapes == nil {
			t.Errorf("mode %q: name %q, sinks %v, capture set %v, shapes set %v", name, m.Name, m.Sinks, m.Capture != nil, m.Shapes != nil)
		}
		for _, f := range []string{m.Differences, m.HostileDifferences, m.SettingsDifferences} {
			if _, err := cluster.ReadIntended(filepath.Join(root, "e2e", "cluster", "testdata", f)); err != nil {
				t.Errorf("mode %q: %v", name, err)
			}
		}
		for _, s := range m.Sinks {
			if Sinks[s] != name {
				t.Errorf("sink %s: Sinks names mode %q, want %q", s, Sinks[s], name)
			}
		}
	}
}
