package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9"
	i := Get()
	if i.Version != "v9.9.9" || i.GoVersion != runtime.Version() || i.Commit == "" {
		t.Errorf("Get() = %+v", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "v9.9.9 (commit ") || !strings.HasSuffix(s, ", "+runtime.Version()+")") {
		t.Errorf("String() = %q", s)
	}
}
