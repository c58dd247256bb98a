package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// dryRun renders the first snapshot and prints the kernel operations it
// would make on an empty node.
//
// A file source is read once (no waiting): the operations of everything
// that could be read are printed, every error of the source is printed to
// stderr, and the dry run fails (naming the first problem) when there is
// any: a file or document that cannot be read (the real sink would not
// take this state as the whole cluster) or an invalid object (skipped).
// The API source is waited for at most DryRunWait. The error lists the
// source's errors, one per line, then the verdict.
func dryRun(ctx context.Context, c Config, nodes *nodeAddrs, src client.Source, sink Sink, stdout io.Writer, log *slog.Logger) error {
	var last error
	b, err := sink.New(Env{Config: c, NodePorts: nodes.cur, Log: log, DryRun: stdout,
		OnSync: func(st SyncStats) { last = st.Err }})
	if err != nil {
		return err
	}
	if b.Close != nil {
		defer b.Close()
	}
	snap, err := firstSnapshot(ctx, src)
	if err != nil {
		return err
	}
	if snap != nil {
		if s, ok := b.Controller.(NodePortsSetter); ok && nodes.setNode(snap.Node) {
			s.SetNodePorts(nodes.cur)
		}
		b.Controller.Snapshot(snap)
	}
	st, objErrs := src.Stats(), src.Errors()
	errs := make([]error, 0, len(objErrs)+1)
	for _, e := range objErrs {
		errs = append(errs, e)
	}
	switch {
	case last != nil:
		errs = append(errs, fmt.Errorf("dry run: %w", last))
	case snap == nil:
		errs = append(errs, fmt.Errorf("dry run: the source gave no state within %s: %s", DryRunWait, st.StaleReason))
	case st.Stale:
		errs = append(errs, fmt.Errorf("dry run: the source cannot give a trustworthy state (%s); the sink would keep the kernel as it is: %w", st.StaleReason, ErrStale))
	case len(objErrs) > 0:
		errs = append(errs, fmt.Errorf("dry run: %d invalid objects skipped (listed above; the sink programs the rest)", len(objErrs)))
	default:
		return nil
	}
	// One per line: the source's errors, then the verdict.
	return errors.Join(errs...)
}

// ErrStale is the dry run's error when its source cannot give a state it
// trusts.
var ErrStale = errors.New("source stale")

// DryRunWait bounds the dry run's wait for the API source's first
// snapshot.
var DryRunWait = 30 * time.Second

// firstSnapshot returns the source's state: a file source's Load (what it
// could read, at once), or the first snapshot another source delivers
// within DryRunWait (nil if none).
func firstSnapshot(ctx context.Context, src client.Source) (*client.Snapshot, error) {
	if l, ok := src.(interface {
		Load() (*client.Snapshot, error)
	}); ok {
		// Its errors are the source's Errors(), printed by the caller.
		snap, _ := l.Load()
		return snap, nil
	}
	ctx, cancel := context.WithTimeout(ctx, DryRunWait)
	defer cancel()
	var first *client.Snapshot
	var once sync.Once
	err := src.Run(ctx, func(s *client.Snapshot) {
		once.Do(func() { first = s; cancel() })
	})
	if first == nil && err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return first, nil
}
