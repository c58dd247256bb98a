package quarantine

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBackoff: a refused object waits 1 s, then twice as long at each
// refusal up to the maximum; a change of what is wanted is retried at
// once; a write that succeeds clears it.
func TestBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New[string](time.Second, 5*time.Second)
	s.Now = func() time.Time { return now }
	o := Object{Kind: "Service", Name: "ns/a"}
	refused := errors.New("refused")
	if !s.Fail("a", o, 1, refused) {
		t.Fatal("first refusal: not new")
	}
	var waits []time.Duration
	for range 5 {
		e := s.Entries()[0]
		waits = append(waits, e.Next.Sub(now))
		if !s.Hold("a", 1) {
			t.Fatalf("not held before its retry")
		}
		if s.Hold("a", 2) {
			t.Fatalf("held though what is wanted changed")
		}
		now = e.Next
		if s.Hold("a", 1) {
			t.Fatalf("held when due")
		}
		if d := s.Due(); len(d) != 1 {
			t.Fatalf("due: %v", d)
		}
		if s.Fail("a", o, 1, refused) {
			t.Fatal("refused again: new")
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if d := cmp.Diff(want, waits); d != "" {
		t.Errorf("waits -want +got:\n%s", d)
	}
	if got := s.Entries()[0].Attempts; got != 6 {
		t.Errorf("attempts %d, want 6", got)
	}
	if !s.Clear("a") || s.Len() != 0 || s.Hold("a", 1) {
		t.Errorf("clear left %d", s.Len())
	}
}

// TestKeepAndNext: objects no longer wanted leave; Next is the earliest
// retry.
func TestKeepAndNext(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New[int](0, 0)
	s.Now = func() time.Time { return now }
	s.Fail(1, Object{Kind: "SetEntry", Name: "b"}, nil, errors.New("x"))
	now = now.Add(time.Second / 2)
	s.Fail(2, Object{Kind: "Address", Name: "a"}, nil, errors.New("y"))
	es := s.Entries()
	if es[0].Kind != "Address" || es[1].Kind != "SetEntry" {
		t.Errorf("order: %+v", es)
	}
	if got, want := Next(es), time.Unix(1001, 0); !got.Equal(want) {
		t.Errorf("next %v, want %v", got, want)
	}
	s.Keep(func(k int) bool { return k == 2 })
	if s.Len() != 1 || !s.Has(2) {
		t.Errorf("keep: %d left", s.Len())
	}
}
