// Package file is a source that reads Kubernetes manifests (Services,
// EndpointSlices, optionally this node's Node and, when the sink asks for
// them, ServiceCIDRs, in multi-document YAML or JSON files, or Lists) from a file or a directory, applies the same
// node-local rules as the kube source (package nodelocal) and watches the
// path with fsnotify so that edits produce new snapshots. It is the source
// of the demo, the e2e tests and the benchmarks, and needs no cluster.
package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

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
	cfg  Config
	log  *slog.Logger
	opts options // what parsing reads, from cfg

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
		opts:    options{proxyName: cfg.ProxyName, serviceCIDRs: cfg.Needs.ServiceCIDRs},
		state:   nodelocal.NewState(nodelocal.Config{NodeName: cfg.NodeName, ProxyName: cfg.ProxyName, Logger: log, Needs: cfg.Needs}),
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
	snap, _, err := s.load(context.Background())
	return snap, err
}

// load is Load, stopped by ctx; changed reports whether the snapshot
// differs from the previous one (nodelocal.State.Changed).
func (s *Source) load(ctx context.Context) (snap *client.Snapshot, changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.reload(ctx, false)
	return s.state.Snapshot(), s.state.Changed(), err
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
		snap, changed, err := s.load(ctx)
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
		if changed || s.cfg.SyncPeriod > 0 {
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

var _ client.Source = (*Source)(nil)
