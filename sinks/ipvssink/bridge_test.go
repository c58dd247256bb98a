package ipvssink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBridgeWarning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string // "" = no file
		want  string // substring; "" = no warning
	}{
		{"module not loaded", "", "br_netfilter is not loaded"},
		{"off", "0\n", "is not 1"},
		{"on", "1\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.value != "" {
				p := filepath.Join(dir, bridgeCallIPTables)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.value), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := bridgeWarning(dir)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("bridgeWarning = %q, want one containing %q", got, tc.want)
			}
		})
	}
}
