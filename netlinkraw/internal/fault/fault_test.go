package fault

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNthAndCount(t *testing.T) {
	var nth Nth[string]
	var count Count[string]
	nth.Arm(3, "x")
	count.Arm(2, "y")
	var gotNth, gotCount []string
	for range 5 {
		v, _ := nth.Next()
		gotNth = append(gotNth, v)
		v, _ = count.Next()
		gotCount = append(gotCount, v)
	}
	if diff := cmp.Diff([]string{"", "", "x", "", ""}, gotNth); diff != "" {
		t.Errorf("Nth (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"y", "y", "", "", ""}, gotCount); diff != "" {
		t.Errorf("Count (-want +got):\n%s", diff)
	}
	nth.Arm(-1, "z")
	if _, fired := nth.Next(); fired {
		t.Error("a disarmed Nth fired")
	}
}
