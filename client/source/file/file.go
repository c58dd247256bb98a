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
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
}

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
}

type fileState struct {
	sum  sum
	docs []doc
	// chunks lets a re-read of a changed file skip its unchanged
	// documents.
	chunks chunkCache
}

// New returns a file source.
func New(cfg Config) *Source {
	if cfg.MinInterval == 0 {
		cfg.MinInterval = 100 * time.Millisecond
	}
	if cfg.Settle == 0 {
		cfg.Settle = 50 * time.Millisecond
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
// that changed since the previous Load. It fails when the path cannot be
// read; a file that does not parse keeps its last good content and the
// error is logged and returned joined with others, while the snapshot still
// reflects every other file.
func (s *Source) Load() (*client.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.reload(false)
	return s.state.Snapshot(), err
}

// Stats returns the invalid-object and service counters (for metrics).
func (s *Source) Stats() client.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Stats()
}

// Errors returns the objects that are invalid right now.
func (s *Source) Errors() []*client.ObjectError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Errors()
}

// Run loads the path, delivers the first snapshot, then watches the path
// and delivers a new snapshot after each change, until ctx is done. It
// returns an error only when the path cannot be read or watched at start.
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
	snap, err := s.Load()
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return err
		}
	}
	deliver(snap)

	c := coalesce.New(s.cfg.MinInterval, s.cfg.SyncPeriod).WithSettle(s.cfg.Settle)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		c.Run(ctx, func() {
			snap, err := s.Load()
			if err != nil {
				s.log.Warn("reload failed; keeping the last good content", "error", err)
			}
			if len(snap.Changes) > 0 || s.cfg.SyncPeriod > 0 {
				deliver(snap)
			}
		})
	}()
	base := filepath.Base(s.cfg.Path)
	for {
		select {
		case <-ctx.Done():
			<-runDone
			return nil
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

// files lists the manifest files of the path.
func (s *Source) paths() ([]string, error) {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	if !fi.IsDir() {
		return []string{s.cfg.Path}, nil
	}
	entries, err := os.ReadDir(s.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		switch filepath.Ext(n) {
		case ".yaml", ".yml", ".json":
			p := filepath.Join(s.cfg.Path, n)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// reload re-reads changed files and applies the objects that changed.
func (s *Source) reload(retried bool) error {
	paths, err := s.paths()
	if err != nil {
		return err
	}
	var errs []error
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		seen[p] = true
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("file source: %w", err))
			continue // keep the last good content
		}
		fileSum := hashBytes(data)
		var prev chunkCache
		if fs := s.files[p]; fs != nil {
			if fs.sum == fileSum {
				continue
			}
			prev = fs.chunks
		}
		docs, chunks, err := parseFn(p, data, prev, s.cfg.ProxyName)
		if err != nil {
			if s.files[p] != nil {
				s.log.Warn("file does not parse; keeping its last good content", "file", p, "error", err)
			} else {
				s.log.Warn("file does not parse; ignoring it", "file", p, "error", err)
			}
			errs = append(errs, err)
			continue
		}
		s.files[p] = &fileState{sum: fileSum, docs: docs, chunks: chunks}
	}
	for p := range s.files {
		if !seen[p] {
			delete(s.files, p)
		}
	}

	// The wanted objects: later files override earlier ones.
	n := 0
	for _, fs := range s.files {
		n += len(fs.docs)
	}
	want := make(map[ref]*doc, n) // sized: growing it was 10% of a first load
	for _, p := range paths {
		if fs := s.files[p]; fs != nil {
			for i := range fs.docs {
				d := &fs.docs[i]
				if prev, dup := want[d.ref]; dup && prev.sum != d.sum {
					s.log.Warn("object defined twice; the later file wins", "kind", d.ref.kind,
						"namespace", d.ref.namespace, "name", d.ref.name, "file", p)
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
					return errors.Join(append(errs, s.reload(true))...)
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
	return errors.Join(errs...)
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
