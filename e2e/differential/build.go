package differential

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// shared holds the sink builds of a test process (ShareBuilds): the
// directory, made on first use, and whether builds are shared at all.
var shared struct {
	sync.Mutex
	on  bool
	dir string
}

// ShareBuilds makes BuildSink build each sink once per test process (a
// package may run one in several tests, and linking takes seconds), into
// a directory made on first use. A TestMain calls it before the tests and
// the returned function after them: it removes the directory.
func ShareBuilds() (cleanup func()) {
	shared.Lock()
	shared.on = true
	shared.Unlock()
	return func() {
		shared.Lock()
		defer shared.Unlock()
		if shared.dir != "" {
			os.RemoveAll(shared.dir)
			shared.dir = ""
		}
	}
}

// BuildSink returns the path of the sink's binary built from this tree
// (vm.BuildSink): once per process after ShareBuilds, into the test's
// temporary directory otherwise.
func BuildSink(t testing.TB, sink string) string {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.on {
		return vm.BuildSink(t, sink)
	}
	if shared.dir == "" {
		dir, err := os.MkdirTemp("", "sink-builds-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
	}
	path := filepath.Join(shared.dir, sink)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.Rename(vm.BuildSink(t, sink), path); err != nil {
		t.Fatalf("keep the %s binary for the process: %v", sink, err)
	}
	return path
}
