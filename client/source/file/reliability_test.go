package file

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/logbuf"
)

// emptyList is how an operator empties a manifest on purpose.
const emptyList = "apiVersion: v1\nkind: List\nitems: []\n"

// runSource runs src and returns its snapshots and Run's result.
func runSource(t *testing.T, ctx context.Context, src *Source) (<-chan *client.Snapshot, <-chan error) {
	t.Helper()
	snaps := make(chan *client.Snapshot, 16)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(s *client.Snapshot) { snaps <- s }) }()
	return snaps, done
}

func noSnapshot(t *testing.T, snaps <-chan *client.Snapshot, what string) {
	t.Helper()
	select {
	case s := <-snaps:
		t.Fatalf("%s: delivered a snapshot: %v", what, view(s))
	case <-time.After(400 * time.Millisecond):
	}
}

func nextSnapshot(t *testing.T, snaps <-chan *client.Snapshot, what string) *client.Snapshot {
	t.Helper()
	select {
	case s := <-snaps:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no snapshot", what)
		return nil
	}
}

// endsPromptly cancels ctx and requires Run to return within two seconds.
func endsPromptly(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return within 2s of its context's end")
	}
}

// TestNoFirstSnapshotFromUntrustworthyInput: a path that does not parse or
// reads as empty gives no first snapshot (a sink would delete everything it
// programmed); once the input is fixed, the first snapshot comes.
func TestNoFirstSnapshotFromUntrustworthyInput(t *testing.T) {
	good := join(svcYAML("web", "10.96.0.1", "TCP"), sliceYAML("web-1", "web", "10.244.0.1"))
	for _, tc := range []struct {
		name  string
		setup func(dir string) (path, fix string) // fix: the file to write good content to
	}{
		{"empty file", func(dir string) (string, string) {
			p := filepath.Join(dir, "m.yaml")
			write(t, p, "")
			return p, p
		}},
		{"comments only", func(dir string) (string, string) {
			p := filepath.Join(dir, "m.yaml")
			write(t, p, "# nothing here\n---\n# nor here\n")
			return p, p
		}},
		{"does not parse", func(dir string) (string, string) {
			p := filepath.Join(dir, "m.yaml")
			write(t, p, "kind: Service\n  bad: [indent\n")
			return p, p
		}},
		{"empty directory", func(dir string) (string, string) {
			return dir, filepath.Join(dir, "m.yaml")
		}},
		{"directory with an empty file", func(dir string) (string, string) {
			write(t, filepath.Join(dir, "a.yaml"), svcYAML("api", "10.96.0.2", "UDP"))
			write(t, filepath.Join(dir, "b.yaml"), "")
			return dir, filepath.Join(dir, "b.yaml")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, fix := tc.setup(dir)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			snaps, done := runSource(t, ctx, New(Config{Path: path, MinInterval: 20 * time.Millisecond}))
			noSnapshot(t, snaps, "untrustworthy input")
			replace(t, fix, good)
			s := nextSnapshot(t, snaps, "after the fix")
			if !strings.Contains(strings.Join(view(s), " "), "default/web: 10.244.0.1") {
				t.Errorf("first snapshot after the fix: %v", view(s))
			}
			endsPromptly(t, cancel, done)
		})
	}
}

// TestNoFirstSnapshotFromDevNull: /dev/null reads as empty.
func TestNoFirstSnapshotFromDevNull(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, done := runSource(t, ctx, New(Config{Path: os.DevNull, MinInterval: 20 * time.Millisecond}))
	noSnapshot(t, snaps, "/dev/null")
	endsPromptly(t, cancel, done)
}

// TestEmptiedFileKeepsLastGoodState: a running source whose file is
// truncated to nothing keeps what it served and says which file.
func TestEmptiedFileKeepsLastGoodState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, join(svcYAML("web", "10.96.0.1", "TCP"), sliceYAML("web-1", "web", "10.244.0.1")))
	src := New(Config{Path: path})
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"", "\n# emptied\n"} {
		write(t, path, content)
		s, err := src.Load()
		if err == nil || !strings.Contains(err.Error(), "m.yaml") {
			t.Errorf("emptied file %q: err = %v, want one naming the file", content, err)
		}
		if diff := cmp.Diff([]string{"default/web: 10.244.0.1"}, view(s)); diff != "" || len(s.Changes) != 0 {
			t.Errorf("emptied file %q changed the state (-want +got):\n%s changes %v", content, diff, changes(s))
		}
	}
}

// TestExplicitEmptyList: an explicit empty List is a deliberate empty
// manifest: it is a first snapshot, and it removes what was served.
func TestExplicitEmptyList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, emptyList)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, done := runSource(t, ctx, New(Config{Path: path, MinInterval: 20 * time.Millisecond}))
	if s := nextSnapshot(t, snaps, "explicit empty List"); s.Len() != 0 {
		t.Errorf("first snapshot: %v", view(s))
	}
	replace(t, path, svcYAML("web", "10.96.0.1", "TCP"))
	if s := nextSnapshot(t, snaps, "a service"); s.Len() != 1 {
		t.Errorf("snapshot: %v", view(s))
	}
	replace(t, path, emptyList)
	if s := nextSnapshot(t, snaps, "emptied on purpose"); s.Len() != 0 {
		t.Errorf("snapshot after an explicit empty List: %v", view(s))
	}
	endsPromptly(t, cancel, done)
}

// TestDocumentIsolation: a bad document is skipped with an error naming
// the file and the document; the good documents of the same file are
// served.
func TestDocumentIsolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	goodList := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: in-list\n  spec:\n    clusterIP: 10.96.0.5\n    ports:\n    - port: 80\n- 42\n"
	write(t, path, join(
		svcYAML("a", "10.96.0.1", "TCP"),
		"just a scalar\n",
		svcYAML("b", "10.96.0.2", "TCP"),
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: bad-utf8\n  labels:\n    x: \"\xff\xfe\"\nspec:\n  ports: [\n",
		goodList,
		svcYAML("c", "10.96.0.3", "TCP")[:60], // truncated
	))
	src := New(Config{Path: path})
	s, err := src.Load()
	want := []string{"default/a: ", "default/b: ", "default/in-list: "}
	if diff := cmp.Diff(want, view(s)); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	for _, where := range []string{"m.yaml#1", "m.yaml#3", "m.yaml#4.items[1]", "m.yaml#5"} {
		if err == nil || !strings.Contains(err.Error(), where) {
			t.Errorf("error %v does not name %s", err, where)
		}
	}
}

// TestInvalidPortSkipsOnlyThatPort: the service's valid ports stay.
func TestInvalidPortSkipsOnlyThatPort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  clusterIP: 10.96.0.1\n  ports:\n  - name: http\n    port: 80\n  - name: bad\n    port: 70000\n  - name: https\n    port: 443\n")
	src := New(Config{Path: path})
	s, _ := src.Load()
	var ports []int
	for se := range s.All() {
		for _, p := range se.Service.Ports {
			ports = append(ports, p.Port)
		}
	}
	if diff := cmp.Diff([]int{80, 443}, ports); diff != "" {
		t.Errorf("ports served (-want +got):\n%s", diff)
	}
	errs := src.Errors()
	if len(errs) != 1 || errs[0].Name != "web" || errs[0].Field != "spec.ports[1].port" {
		t.Errorf("errors = %v, want one naming web's spec.ports[1].port", errs)
	}
}

// TestDuplicateInOneFile: the warning names both places and the one used.
func TestDuplicateInOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, join(svcYAML("web", "10.96.0.1", "TCP"), svcYAML("api", "10.96.0.3", "TCP"), svcYAML("web", "10.96.0.2", "TCP")))
	var buf logbuf.Buffer
	src := New(Config{Path: path, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	s, _ := src.Load()
	if got := s.Lookup(client.ServiceKey{Namespace: "default", Name: "web"}).Service.ClusterIPs.All()[0].String(); got != "10.96.0.2" {
		t.Errorf("cluster IP %s, want the later document's", got)
	}
	log := buf.String()
	for _, w := range []string{"m.yaml#0 and ", "m.yaml#2", "using=/"} {
		if !strings.Contains(log, w) {
			t.Errorf("log does not say %q:\n%s", w, log)
		}
	}
	if _, used, _ := strings.Cut(log, "using="); !strings.HasPrefix(used, path+"#2") {
		t.Errorf("log does not say the definition at #2 is used:\n%s", log)
	}
	if strings.Contains(log, "later file") {
		t.Errorf("log speaks of a later file within one file:\n%s", log)
	}
}

// TestSpecialFileDoesNotBlock: a FIFO named *.yaml in the directory is
// skipped with an error naming it; the other files are served.
func TestSpecialFileDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcYAML("web", "10.96.0.1", "TCP"))
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		s   *client.Snapshot
		err error
	}
	res := make(chan result, 1)
	go func() {
		s, err := New(Config{Path: dir}).Load()
		res <- result{s, err}
	}()
	select {
	case r := <-res:
		if r.err == nil || !strings.Contains(r.err.Error(), "fifo.yaml") {
			t.Errorf("err = %v, want one naming fifo.yaml", r.err)
		}
		if diff := cmp.Diff([]string{"default/web: "}, view(r.s)); diff != "" {
			t.Errorf("served (-want +got):\n%s", diff)
		}
	case <-time.After(3 * time.Second):
		// Unblock the reader so that the test ends.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Load blocked on a FIFO")
	}
}

// TestRunEndsOnCancelWhileReading: a path that never gives a trustworthy
// state (here a FIFO nobody writes) does not keep Run from ending.
func TestRunEndsOnCancelWhileReading(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "m.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, done := runSource(t, ctx, New(Config{Path: fifo, MinInterval: 20 * time.Millisecond}))
	time.Sleep(200 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Run returned before its context ended")
	case s := <-snaps:
		t.Fatalf("snapshot from a FIFO: %v", view(s))
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Run did not return within 2s of its context's end")
	}
}

// TestStaleSignal: Stats says whether the state can be trusted, and why;
// Errors names the file.
func TestStaleSignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	src := New(Config{Path: path + ".absent"})
	if st := src.Stats(); !st.Stale || !strings.Contains(st.StaleReason, "no first snapshot") {
		t.Errorf("before any read: %+v", st)
	}
	src = New(Config{Path: path})
	write(t, path, "")
	_, err := src.Load()
	if !errors.Is(err, ErrEmpty) {
		t.Errorf("empty file: err = %v, want ErrEmpty", err)
	}
	if st := src.Stats(); !st.Stale || !strings.Contains(st.StaleReason, "m.yaml: reads as empty") {
		t.Errorf("empty file: %+v", st)
	}
	write(t, path, svcYAML("web", "10.96.0.1", "TCP"))
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	if st := src.Stats(); st.Stale || st.StaleReason != "" {
		t.Errorf("good file: %+v", st)
	}
	write(t, path, "kind: Service\n  bad: [indent\n")
	s, _ := src.Load()
	if diff := cmp.Diff([]string{"default/web: "}, view(s)); diff != "" {
		t.Errorf("broken file changed the state (-want +got):\n%s", diff)
	}
	st := src.Stats()
	if !st.Stale || !strings.Contains(st.StaleReason, "m.yaml#0: not YAML") || strings.Contains(st.StaleReason, "first") {
		t.Errorf("broken file: %+v", st)
	}
	errs := src.Errors()
	if len(errs) != 1 || !strings.HasSuffix(errs[0].Source, "m.yaml#0") || errs[0].Kind != "" {
		t.Errorf("Errors() = %v, want the document", errs)
	}
	write(t, path, svcYAML("web", "10.96.0.1", "TCP"))
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	if st := src.Stats(); st.Stale || len(src.Errors()) != 0 {
		t.Errorf("fixed: %+v %v", st, src.Errors())
	}
}

// TestBadDocumentKeepsUnidentifiedObjects: while a running file has a
// document that cannot be read, its objects that the rest of the file no
// longer defines stay (one may be that document's); once the file reads
// completely, they go.
func TestBadDocumentKeepsUnidentifiedObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, join(svcYAML("a", "10.96.0.1", "TCP"), svcYAML("b", "10.96.0.2", "TCP")))
	src := New(Config{Path: path})
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	// b's document is broken by an edit; a is changed and c added.
	write(t, path, join(svcYAML("a", "10.96.0.9", "TCP"), "kind: Service\n  bad: [indent\n", svcYAML("c", "10.96.0.3", "TCP")))
	s, err := src.Load()
	if err == nil || !strings.Contains(err.Error(), "m.yaml#1") {
		t.Errorf("err = %v, want one naming m.yaml#1", err)
	}
	if diff := cmp.Diff([]string{"default/a: ", "default/b: ", "default/c: "}, view(s)); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	if got := s.Lookup(client.ServiceKey{Namespace: "default", Name: "a"}).Service.ClusterIPs.All()[0].String(); got != "10.96.0.9" {
		t.Errorf("a's readable edit not applied: %s", got)
	}
	// A second broken edit still keeps b.
	write(t, path, join(svcYAML("a", "10.96.0.9", "TCP"), "kind: Service\n  worse: [\n", svcYAML("c", "10.96.0.3", "TCP")))
	if s, _ := src.Load(); s.Len() != 3 {
		t.Errorf("second broken edit: %v", view(s))
	}
	// Fixed without b: b goes.
	write(t, path, join(svcYAML("a", "10.96.0.9", "TCP"), svcYAML("c", "10.96.0.3", "TCP")))
	s, err = src.Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/a: ", "default/c: "}, view(s)); diff != "" {
		t.Errorf("after the fix (-want +got):\n%s", diff)
	}
}

// TestSizeLimit: a file larger than the limit is an error naming it and
// keeps its last good content; the default limit holds without reading
// the file.
func TestSizeLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	write(t, path, svcYAML("web", "10.96.0.1", "TCP"))
	src := New(Config{Path: path, MaxFileSize: 1024})
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	write(t, path, svcYAML("web", "10.96.0.1", "TCP")+"# "+strings.Repeat("x", 2048)+"\n")
	s, err := src.Load()
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "m.yaml") {
		t.Errorf("err = %v, want ErrTooLarge naming the file", err)
	}
	if s.Len() != 1 {
		t.Errorf("too large a file changed the state: %v", view(s))
	}

	// The default: a sparse file of 257 MiB is refused before reading.
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(DefaultMaxFileSize + 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = New(Config{Path: big}).Load()
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "big.yaml") {
		t.Errorf("err = %v, want ErrTooLarge naming big.yaml", err)
	}
}

// TestReadHonoursContext: a read stops when its context ends.
func TestReadHonoursContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, strings.Repeat("# padding\n", 1<<20))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := readFile(ctx, path, DefaultMaxFileSize); !errors.Is(err, context.Canceled) {
		t.Errorf("read with an ended context: %v", err)
	}
	data, err := readFile(context.Background(), path, DefaultMaxFileSize)
	if err != nil || len(data) != 10<<20 {
		t.Errorf("read: %d bytes, %v", len(data), err)
	}
}

// TestErrorChains: the errors a source reports keep their causes.
func TestErrorChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	write(t, path, "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIP: 10.96.0.4\n  ports:\n  - port: eighty\n")
	src := New(Config{Path: path})
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	errs := src.Errors()
	var te *json.UnmarshalTypeError
	if len(errs) != 1 || !errors.As(errs[0], &te) || errs[0].Error() != "Service default/x ("+path+"#0): spec.ports.port: cannot use string as int32" {
		t.Errorf("Errors() = %v, want the JSON type error kept in the chain", errs)
	}
	write(t, path, "")
	_, err := src.Load()
	var oe *client.ObjectError
	if !errors.Is(err, ErrEmpty) || !errors.As(err, &oe) || oe.Source != path {
		t.Errorf("Load of an emptied file: %v, want ErrEmpty in an ObjectError naming the file", err)
	}
}
