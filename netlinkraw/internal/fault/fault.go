// Package fault holds the machinery the fake kernels (ipvstest,
// ipsettest) and the clients' fault tests share: counters of injected
// failures, which fire in the order the fake meets them and then let it
// behave normally again, and a bound on how long a failing call may take.
package fault

import (
	"testing"
	"time"
)

// counter counts down the events still to fire on.
type counter struct{ left int }

// take counts an event and reports whether one was left.
func (c *counter) take() bool {
	if c.left == 0 {
		return false
	}
	c.left--
	return true
}

// Nth fires on the nth event counted from when it was armed (1: the
// next), once, with the value it was armed with.
type Nth[V any] struct {
	counter
	v V
}

// Arm makes the nth event from now fire with v; n <= 0 disarms it.
func (f *Nth[V]) Arm(n int, v V) { f.left, f.v = max(n, 0), v }

// Next counts an event and reports whether it is the one that fires.
func (f *Nth[V]) Next() (v V, fired bool) {
	if f.take() && f.left == 0 {
		return f.v, true
	}
	return v, false
}

// Count fires on each of the next n events, with the value it was armed
// with.
type Count[V any] struct {
	counter
	v V
}

// Arm makes the next n events fire with v; n <= 0 disarms it.
func (f *Count[V]) Arm(n int, v V) { f.left, f.v = max(n, 0), v }

// Next counts an event and reports whether it fires.
func (f *Count[V]) Next() (v V, fired bool) {
	if f.take() {
		return f.v, true
	}
	return v, false
}

// Bounded runs f and fails the test when it takes longer than d: a fault
// must fail a call in bounded time, never hang it.
func Bounded(t testing.TB, d time.Duration, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	if took := time.Since(start); took > d {
		t.Errorf("call took %v, more than %v", took, d)
	}
	return err
}

// Bounded2 is Bounded for a call that returns a value.
func Bounded2[T any](t testing.TB, d time.Duration, f func() (T, error)) (T, error) {
	t.Helper()
	var v T
	err := Bounded(t, d, func() error {
		var err error
		v, err = f()
		return err
	})
	return v, err
}
