package vm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitSuites(t *testing.T) {
	const tag = "T-1"
	for _, tc := range []struct {
		name, console string
		want          map[string]SuiteResult
		rest          string
	}{{
		name:    "two suites, one failing",
		console: "boot\nT-1 begin a\n=== RUN TestA\nok\nT-1 end a 0\nT-1 begin b\n--- FAIL: TestB\nT-1 end b 1\n",
		want: map[string]SuiteResult{
			"a": {Name: "a", Output: "=== RUN TestA\nok\n", Done: true},
			"b": {Name: "b", Output: "--- FAIL: TestB\n", Status: 1, Done: true},
		},
		rest: "boot\n",
	}, {
		name:    "the guest stopped inside a suite",
		console: "T-1 begin a\nT-1 end a 0\nT-1 begin b\nKernel panic\n",
		want: map[string]SuiteResult{
			"a": {Name: "a", Done: true},
			"b": {Name: "b", Output: "Kernel panic\n"},
		},
	}, {
		name:    "another tag and a mismatched end are output",
		console: "T-1 begin a\nT-2 end a 0\nT-1 end b 0\nT-1 end a 3\n",
		want: map[string]SuiteResult{
			"a": {Name: "a", Output: "T-2 end a 0\nT-1 end b 0\n", Status: 3, Done: true},
		},
	}, {
		name:    "a suite that never began",
		console: "T-1 begin a\nT-1 end a 0\n",
		want:    map[string]SuiteResult{"a": {Name: "a", Done: true}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, rest := splitSuites(tc.console, tag)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if rest != tc.rest {
				t.Errorf("rest %q, want %q", rest, tc.rest)
			}
		})
	}
}
