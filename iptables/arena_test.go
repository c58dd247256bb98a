package iptables

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestArenaCompaction: a full sync that reuses less than half of an older
// arena's text copies those renderings into its own arena (the older one
// can be freed); one that reuses more keeps them where they are. Either
// way it writes what a fresh Proxier writes.
func TestArenaCompaction(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changed int // of 20 services, the first changed lose an endpoint
		compact bool
	}{
		{name: "all reused", changed: 0, compact: false},
		{name: "most reused", changed: 5, compact: false},
		{name: "few reused", changed: 15, compact: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, out := dryRun(t, nil)
			specs := cluster(20, 3)
			if _, err := p.Snapshot(snapshot(specs...)); err != nil {
				t.Fatal(err)
			}
			f := p.fams[0]
			first := f.lastGen
			if len(f.gens) != 1 || f.gens[first] == 0 {
				t.Fatalf("after the first sync, arenas %v, want only %d", f.gens, first)
			}
			changed := map[string]bool{}
			for i := range tc.changed {
				specs[i].eps = specs[i].eps[1:]
				changed[specs[i].name] = true
			}
			s := snapshot(specs...)
			s.Full = true
			out.Reset()
			if _, err := p.Snapshot(s); err != nil {
				t.Fatal(err)
			}
			for k, r := range f.svcs {
				want := f.lastGen
				if !tc.compact && !changed[k.Name] {
					want = first
				}
				if r.gen != want {
					t.Errorf("%v: rendering in arena %d, want %d", k, r.gen, want)
				}
			}
			_, kept := f.gens[first]
			if kept == tc.compact {
				t.Errorf("arenas %v: first arena %d kept %v, want %v", f.gens, first, kept, !tc.compact)
			}
			fresh, freshOut := dryRun(t, nil)
			if _, err := fresh.Snapshot(snapshot(specs...)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(freshOut.String(), out.String()); diff != "" {
				t.Errorf("full sync differs from a fresh Proxier's (-fresh +got):\n%s", diff)
			}
		})
	}
}
