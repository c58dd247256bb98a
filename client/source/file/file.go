// Package file is a source that reads Kubernetes manifests (Services,
// EndpointSlices and optionally this node's Node, in multi-document YAML or
// JSON files, or Lists) from a file or a directory, applies the same
// node-local rules as the kube source (package nodelocal) and watches the
// path with fsnotify so that edits produce new snapshots. It is the source
// of the demo, the e2e tests and the benchmarks, and needs no cluster.
package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
	"github.com/proxysinks/proxysinks/client/source/coalesce"
)

// Config configures a file source.
type Config struct {
	// Path is a manifest file, or a directory whose *.yaml, *.yml and *.json
	// files (not recursive) are read in name order.
	Path string
	// NodeName is this node's name (see nodelocal.Config).
	NodeName string
	// ProxyName selects services by their service-proxy-name label (see
	// nodelocal.ConvertService).
	ProxyName string
	// MinInterval is the shortest time between two snapshots; file events
	// within it are coalesced. Zero means 100ms.
	MinInterval time.Duration
	// Settle is how long the files must stay quiet before they are read
	// after a change, so that a non-atomic write (truncate, then write) is
	// read once complete. Zero means 50ms; negative means no wait.
	Settle time.Duration
	// SyncPeriod, when positive, delivers a snapshot at least this often
	// even without changes.
	SyncPeriod time.Duration
	// Logger receives parse errors and invalid objects; nil means
	// slog.Default().
	Logger *slog.Logger
	// MaxFileSize is the largest manifest file read, in bytes; a larger
	// file is an error naming it (and keeps its last good content). Zero
	// means DefaultMaxFileSize.
	MaxFileSize int64
	// RetryInterval is how often Run reads the path again while it has
	// not delivered its first snapshot (besides on every file event). Zero
	// means 1s.
	RetryInterval time.Duration
	// Needs are the optional kinds and fields the sink asked for.
	Needs client.Needs
}

// DefaultMaxFileSize is the default Config.MaxFileSize: 256 MiB, about ten
// times a 10,000-service manifest with 10 endpoints each.
const DefaultMaxFileSize = 256 << 20

// Source reads manifests into node-local snapshots.
type Source struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	state *nodelocal.State
	// files holds the last good parse of each file, by path.
	files map[string]*fileState
	// applied holds the hashes of the objects given to state, by ref.
	applied map[ref]sum
	// problems are what the last read could not use: files that cannot be
	// read or parsed or read as empty, and documents that are not
	// Kubernetes objects, in path order. Non-empty: the state is stale.
	problems []*client.ObjectError
	// trusted is set once every manifest file has been read completely
	// (every document identified) at least once: the first snapshot waits
	// for it.
	trusted bool
}

type fileState struct {
	sum  sum
	docs []doc
	// chunks lets a re-read of a changed file skip its unchanged
	// documents.
	chunks chunkCache
	// bad are the documents of this content that are not Kubernetes
	// objects.
	bad []*client.ObjectError
	// kept are objects of the file's earlier content that its current
	// content does not define while some of its documents cannot be read:
	// they stay (one of them may be the unreadable document's) until the
	// file reads completely.
	kept []doc
}

// New returns a file source.
func New(cfg Config) *Source {
	if cfg.MinInterval == 0 {
		cfg.MinInterval = 100 * time.Millisecond
	}
	if cfg.Settle == 0 {
		cfg.Settle = 50 * time.Millisecond
	}
	if cfg.MaxFileSize == 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Source{
		cfg:     cfg,
		log:     log.With("source", "file", "path", cfg.Path),
		state:   nodelocal.NewState(nodelocal.Config{NodeName: cfg.NodeName, ProxyName: cfg.ProxyName, Logger: log}),
		files:   map[string]*fileState{},
		applied: map[ref]sum{},
	}
}

// Load reads the path (again) and returns a snapshot listing the services
// that changed since the previous Load. What cannot be read keeps its last
// good content, and the error names it: a path that cannot be listed or
// holds no manifest file changes nothing; a file that cannot be read, does
// not parse or reads as empty keeps its last good content; a document that
// is not a Kubernetes object is skipped, and the objects of the file's
// earlier content that are no longer defined stay until it reads
// completely. The snapshot reflects everything else. Stats().Stale tells
// whether it can be trusted as the whole state (Run delivers no first
// snapshot until it can).
func (s *Source) Load() (*client.Snapshot, error) {
	return s.load(context.Background())
}

func (s *Source) load(ctx context.Context) (*client.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.reload(ctx, false)
	return s.state.Snapshot(), err
}

// Stats returns the invalid-object and service counters (for metrics), and
// whether the state is stale (see client.Stats).
func (s *Source) Stats() client.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Stats()
	switch {
	case len(s.problems) > 0:
		st.Stale = true
		st.StaleReason = s.problems[0].Error()
		if n := len(s.problems); n > 1 {
			st.StaleReason += fmt.Sprintf(" (and %d more)", n-1)
		}
		if !s.trusted {
			st.StaleReason = "no first snapshot yet: " + st.StaleReason
		}
	case !s.trusted:
		st.Stale, st.StaleReason = true, "no first snapshot yet: the manifests were not read yet"
	}
	return st
}

// Errors returns the objects that are invalid right now, then the files and
// documents that cannot be read right now (their ObjectError has only Source
// and Err).
func (s *Source) Errors() []*client.ObjectError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(s.state.Errors(), s.problems...)
}

// Run loads the path and delivers the first snapshot once the manifests
// can be trusted (every file read, none empty, every document a Kubernetes
// object: see Load), retrying on every file event and every RetryInterval
// until then; then it delivers a new snapshot after each change, until ctx
// is done. It returns an error only when the path cannot be found or
// watched at start.
func (s *Source) Run(ctx context.Context, deliver func(*client.Snapshot)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file source: watch %s: %w", s.cfg.Path, err)
	}
	defer w.Close()
	dir, isDir, err := s.watchDir()
	if err != nil {
		return err
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("file source: watch %s: %w", dir, err)
	}

	var delivered atomic.Bool
	lastWhy := ""
	// step reads the path and delivers what there is to deliver.
	step := func() {
		snap, err := s.load(ctx)
		if ctx.Err() != nil {
			return
		}
		if !delivered.Load() {
			st := s.Stats()
			if !s.isTrusted() {
				if st.StaleReason != lastWhy {
					s.log.Warn("not delivering a first snapshot: the manifests cannot be trusted yet; retrying",
						"reason", st.StaleReason, "error", err)
					lastWhy = st.StaleReason
				}
				return
			}
			if err != nil {
				s.log.Warn("first snapshot without the parts that cannot be read", "error", err)
			}
			delivered.Store(true)
			deliver(snap)
			return
		}
		if err != nil {
			s.log.Warn("reload incomplete; serving the last good content of what cannot be read", "error", err)
		}
		if len(snap.Changes) > 0 || s.cfg.SyncPeriod > 0 {
			deliver(snap)
		}
	}
	step()

	c := coalesce.New(s.cfg.MinInterval, s.cfg.SyncPeriod).WithSettle(s.cfg.Settle)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		c.Run(ctx, step)
	}()
	retry := time.NewTicker(s.cfg.RetryInterval)
	defer retry.Stop()
	base := filepath.Base(s.cfg.Path)
	for {
		select {
		case <-ctx.Done():
			<-runDone
			return nil
		case <-retry.C:
			if !delivered.Load() {
				c.Kick()
			}
		case ev, ok := <-w.Events:
			if !ok {
				<-runDone
				return nil
			}
			name := filepath.Base(ev.Name)
			// In file mode, react to the file and to Kubernetes' ConfigMap
			// volume swaps (..data); in directory mode, to anything.
			if isDir || name == base || strings.HasPrefix(name, "..") {
				c.Kick()
			}
		case err, ok := <-w.Errors:
			if ok {
				s.log.Warn("watch error", "error", err)
			}
		}
	}
}

func (s *Source) isTrusted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trusted
}

// watchDir returns the directory to watch: the path itself, or a file's
// parent (editors replace files by renaming, which a watch on the file
// itself would lose).
func (s *Source) watchDir() (string, bool, error) {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		return "", false, fmt.Errorf("file source: %w", err)
	}
	if fi.IsDir() {
		return s.cfg.Path, true, nil
	}
	return filepath.Dir(s.cfg.Path), false, nil
}

// paths lists the manifest files of the path, and the entries named like
// manifests that are not regular files (a FIFO, a device: reading them
// could block or never end), as errors naming them.
func (s *Source) paths() ([]string, []*client.ObjectError, error) {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("file source: %w", err)
	}
	if !fi.IsDir() {
		return []string{s.cfg.Path}, nil, nil
	}
	entries, err := os.ReadDir(s.cfg.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("file source: %w", err)
	}
	var out []string
	var skipped []*client.ObjectError
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		switch filepath.Ext(n) {
		case ".yaml", ".yml", ".json":
			p := filepath.Join(s.cfg.Path, n)
			fi, err := os.Stat(p) // follows symbolic links (ConfigMap volumes); never blocks
			switch {
			case err != nil:
				skipped = append(skipped, &client.ObjectError{Source: p, Err: err})
			case fi.IsDir():
			case !fi.Mode().IsRegular():
				skipped = append(skipped, &client.ObjectError{Source: p, Err: notRegular(fi)})
			default:
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, skipped, nil
}

// ErrNotRegular is the error of a manifest path that is not a regular file
// (a FIFO, a device, a socket): it is not read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the error of a manifest file larger than
// Config.MaxFileSize.
var ErrTooLarge = errors.New("file too large")

// ErrEmpty is the error of a manifest file that holds no document (empty,
// only comments): it is not taken as "no objects"; an explicit empty List
// is.
var ErrEmpty = errors.New("reads as empty (no document; to serve nothing on purpose write an empty List: `apiVersion: v1`, `kind: List`, `items: []`)")

// ErrNoManifests is the error of a directory without any manifest file.
var ErrNoManifests = errors.New("no manifest file (*.yaml, *.yml, *.json)")

func notRegular(fi os.FileInfo) error {
	what := "special file"
	switch t := fi.Mode().Type(); {
	case t&os.ModeNamedPipe != 0:
		what = "FIFO"
	case t&os.ModeSocket != 0:
		what = "socket"
	case t&os.ModeCharDevice != 0:
		what = "character device"
	case t&os.ModeDevice != 0:
		what = "block device"
	}
	return fmt.Errorf("%w: a %s; skipped", ErrNotRegular, what)
}

// readFile reads a manifest file: a regular file of at most limit bytes,
// checking ctx between blocks. It opens without blocking (a FIFO would
// block the open until a writer comes).
func readFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrTooLarge, fi.Size(), limit)
	}
	const block = 4 << 20
	data := make([]byte, 0, fi.Size()+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, min(len(data)+1, block))
		}
		n, err := f.Read(data[len(data):min(cap(data), len(data)+block)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("%w: more than the limit of %d bytes", ErrTooLarge, limit)
		}
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// reload re-reads changed files and applies the objects that changed.
func (s *Source) reload(ctx context.Context, retried bool) error {
	paths, problems, err := s.paths()
	if err == nil && len(paths) == 0 {
		err = &client.ObjectError{Source: s.cfg.Path, Err: ErrNoManifests}
	}
	if err != nil {
		// Nothing can be trusted: nothing changes.
		oe, ok := err.(*client.ObjectError)
		if !ok {
			oe = &client.ObjectError{Source: s.cfg.Path, Err: err}
		}
		s.problems = []*client.ObjectError{oe}
		return err
	}
	seen := make(map[string]bool, len(paths))
	complete := true // every file read, every document identified
	for _, p := range paths {
		seen[p] = true
		fail := func(err error) {
			var pe *os.PathError
			if errors.As(err, &pe) && pe.Path == p {
				err = fmt.Errorf("%s: %w", pe.Op, pe.Err) // the path is the Source
			}
			problems = append(problems, &client.ObjectError{Source: p, Err: err})
			complete = false
		}
		data, err := readFile(ctx, p, s.cfg.MaxFileSize)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fail(err) // keep the last good content
			continue
		}
		fileSum := hashBytes(data)
		var prev chunkCache
		old := s.files[p]
		if old != nil {
			if old.sum == fileSum {
				problems = append(problems, old.bad...)
				complete = complete && len(old.bad) == 0
				continue
			}
			prev = old.chunks
		}
		pr, err := parseFn(p, data, prev, s.cfg.ProxyName)
		if err == nil && pr.empty() {
			err = ErrEmpty
		}
		if err != nil {
			var oe *client.ObjectError
			if errors.As(err, &oe) {
				problems = append(problems, oe)
				complete = false
			} else {
				fail(err)
			}
			continue
		}
		fs := &fileState{sum: fileSum, docs: pr.docs, chunks: pr.cache, bad: pr.bad}
		if len(pr.bad) > 0 {
			complete = false
			problems = append(problems, pr.bad...)
			if old != nil {
				fs.kept = keptDocs(old, pr.docs)
			}
		}
		s.files[p] = fs
	}
	for p := range s.files {
		if !seen[p] {
			delete(s.files, p)
		}
	}
	s.problems = problems
	if complete {
		s.trusted = true
	}

	// The wanted objects: later definitions override earlier ones.
	n := 0
	for _, fs := range s.files {
		n += len(fs.docs) + len(fs.kept)
	}
	want := make(map[ref]*doc, n) // sized: growing it was 10% of a first load
	for _, p := range paths {
		fs := s.files[p]
		if fs == nil {
			continue
		}
		for _, list := range [][]doc{fs.docs, fs.kept} {
			for i := range list {
				d := &list[i]
				if prev, dup := want[d.ref]; dup && prev.sum != d.sum {
					s.log.Warn("object defined twice; using the later definition", "kind", d.ref.kind,
						"namespace", d.ref.namespace, "name", d.ref.name,
						"defined", fmt.Sprintf("%s#%d and %s#%d", prev.in, prev.at, d.in, d.at),
						"using", fmt.Sprintf("%s#%d", d.in, d.at))
				}
				want[d.ref] = d
			}
		}
	}
	// A winning definition whose decoded object was already dropped (an
	// overriding definition went away): decode its file again.
	if !retried {
		for _, p := range paths {
			fs := s.files[p]
			if fs == nil {
				continue
			}
			for i := range fs.docs {
				d := &fs.docs[i]
				old, ok := s.applied[d.ref]
				if want[d.ref] == d && d.obj == nil && d.err == nil && (!ok || old != d.sum) {
					delete(s.files, p)
					return s.reload(ctx, true)
				}
			}
		}
	}
	for r := range s.applied {
		if _, ok := want[r]; !ok {
			s.remove(r)
		}
	}
	applied := make(map[ref]sum, len(want))
	for r, d := range want {
		applied[r] = d.sum
		if old, ok := s.applied[r]; ok && old == d.sum {
			continue
		}
		s.apply(d)
	}
	s.applied = applied
	if len(problems) == 0 {
		return nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return fmt.Errorf("file source: %w", errors.Join(errs...))
}

// keptDocs returns the objects of a file's earlier content (old) that its
// new content (docs) does not define.
func keptDocs(old *fileState, docs []doc) []doc {
	defined := make(map[ref]bool, len(docs))
	for _, d := range docs {
		defined[d.ref] = true
	}
	var kept []doc
	for _, list := range [][]doc{old.docs, old.kept} {
		for _, d := range list {
			if !defined[d.ref] {
				defined[d.ref] = true
				kept = append(kept, d)
			}
		}
	}
	return kept
}

func (s *Source) apply(d *doc) {
	if d.err != nil {
		// Decoding failed: the object is skipped (its earlier version, if
		// any, goes away) and counted.
		s.remove(d.ref)
		s.state.Invalid(d.err)
		return
	}
	o := d.obj
	d.obj = nil // applied: the state holds what it needs
	switch o := o.(type) {
	case *nodelocal.ConvertedService:
		_ = s.state.SetConvertedService(o) // the state logs and counts errors
	case *nodelocal.ParsedSlice:
		_ = s.state.SetParsedSlice(o)
	case *corev1.Service: // the old decoder, in the benchmark
		_ = s.state.SetService(o)
	case *discoveryv1.EndpointSlice:
		_ = s.state.SetSlice(o)
	case *corev1.Node:
		s.state.SetNode(o)
	}
}

func (s *Source) remove(r ref) {
	switch r.kind {
	case "Service":
		s.state.DeleteService(r.namespace, r.name)
	case "EndpointSlice":
		s.state.DeleteSlice(r.namespace, r.name)
	case "Node":
		s.state.DeleteNode(r.name)
	}
}

// parseFn is parseFile; the benchmark swaps in the old decoder as its
// baseline.
var parseFn = parseConverted

var _ client.Source = (*Source)(nil)
