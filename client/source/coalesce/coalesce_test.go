package coalesce

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestBurstIsCoalesced(t *testing.T) {
	c := New(200*time.Millisecond, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs atomic.Int32
	done := make(chan struct{})
	go func() {
		c.Run(ctx, func() { runs.Add(1) })
		close(done)
	}()
	c.Kick()
	// Wait for the first run, then send a burst within the interval.
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	for range 1000 {
		c.Kick()
	}
	for runs.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("runs = %d after a burst, want 2", got)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("second run after %v, want about the 200ms minimum interval", waited)
	}
	time.Sleep(300 * time.Millisecond)
	if got := runs.Load(); got != 2 {
		t.Errorf("runs = %d without kicks, want 2", got)
	}
	cancel()
	<-done
}

func TestPeriod(t *testing.T) {
	c := New(0, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var runs atomic.Int32
	c.Run(ctx, func() {
		if runs.Add(1) == 3 {
			cancel()
		}
	})
	if runs.Load() < 3 {
		t.Errorf("runs = %d, want periodic runs", runs.Load())
	}
}

func TestSettle(t *testing.T) {
	c := New(0, 0).WithSettle(100 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan time.Time, 10)
	go c.Run(ctx, func() { ran <- time.Now() })
	// Kicks every 20ms for 200ms: no run until they stop.
	start := time.Now()
	for range 10 {
		c.Kick()
		time.Sleep(20 * time.Millisecond)
	}
	lastKick := time.Now()
	select {
	case at := <-ran:
		if at.Before(lastKick) {
			t.Errorf("ran %v after the first kick, before the burst ended (%v)", at.Sub(start), lastKick.Sub(start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no run")
	}
	select {
	case <-ran:
		t.Error("a settled burst ran twice")
	case <-time.After(200 * time.Millisecond):
	}
}
