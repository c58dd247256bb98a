package iptables

import "testing"

// TestTableIndex: tableIndex agrees with the order of tables.
func TestTableIndex(t *testing.T) {
	for i, name := range tables {
		if got := tableIndex(name); got != i {
			t.Errorf("tableIndex(%q) = %d, want %d", name, got, i)
		}
	}
}
