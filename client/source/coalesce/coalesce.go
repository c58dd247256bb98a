// Package coalesce turns bursts of change notifications into few runs of a
// function: sources use it so that a flood of API or file events produces
// one snapshot per minimum interval, not one per event.
package coalesce

import (
	"context"
	"time"
)

// Coalescer calls a function after Kick, at most once per minimum interval,
// and optionally every period even without kicks.
type Coalescer struct {
	kick   chan struct{}
	min    time.Duration
	period time.Duration
	settle time.Duration
}

// New returns a Coalescer that runs at most once per min (0: as soon as
// possible) and at least once per period (0: only when kicked).
func New(min, period time.Duration) *Coalescer {
	return &Coalescer{kick: make(chan struct{}, 1), min: min, period: period}
}

// WithSettle makes each run wait until no kick has come for d (but never
// more than 10*d in all), so that a writer's burst (truncate, write, write)
// is read once it is complete. It returns c.
func (c *Coalescer) WithSettle(d time.Duration) *Coalescer {
	c.settle = d
	return c
}

// Kick asks for a run. It never blocks; kicks before the run starts are
// merged into that run.
func (c *Coalescer) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run calls fn for kicks and periods until ctx is done. fn runs on the
// calling goroutine; kicks that arrive while it runs lead to one more run.
// The minimum interval counts from the start of Run, as the caller has
// usually just delivered a first snapshot.
func (c *Coalescer) Run(ctx context.Context, fn func()) {
	last := time.Now()
	var periodic <-chan time.Time
	if c.period > 0 {
		t := time.NewTicker(c.period)
		defer t.Stop()
		periodic = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			if !c.waitSettled(ctx) {
				return
			}
		case <-periodic:
		}
		if wait := c.min - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		// Kicks received while waiting are part of this run.
		select {
		case <-c.kick:
		default:
		}
		last = time.Now()
		fn()
	}
}

// waitSettled waits for a quiet time of c.settle. It returns false when ctx
// is done.
func (c *Coalescer) waitSettled(ctx context.Context) bool {
	if c.settle <= 0 {
		return true
	}
	deadline := time.Now().Add(10 * c.settle)
	t := time.NewTimer(c.settle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-c.kick:
			wait := min(c.settle, time.Until(deadline))
			if wait <= 0 {
				return true
			}
			t.Reset(wait)
		}
	}
}
