package iptables

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// nsGeneration reads the nf_tables generation of a test's namespace.
func nsGeneration(ns *nstest.NetNS) func() (uint32, error) {
	return func() (uint32, error) { return xtables.NFTGeneration(ns.FD()) }
}

// toolCounter counts the iptables-save and iptables-restore runs of a
// Proxier's Run.
type toolCounter struct {
	saves, restores int
	// after, when set, runs after each successful restore.
	after func()
}

func (c *toolCounter) wrap(run xtables.Runner) xtables.Runner {
	return func(name string, args []string, stdin []byte) ([]byte, error) {
		switch {
		case strings.HasSuffix(name, "-save"):
			c.saves++
		case strings.HasSuffix(name, "-restore"):
			c.restores++
		}
		out, err := run(name, args, stdin)
		if err == nil && strings.HasSuffix(name, "-restore") && c.after != nil {
			c.after()
		}
		return out, err
	}
}

// countingProxier is kernelProxier with its tool runs counted.
func countingProxier(t *testing.T, b xtables.Backend, mod func(*Config)) (*Proxier, *nstest.NetNS, *toolCounter) {
	t.Helper()
	c := &toolCounter{}
	p, ns := kernelProxier(t, b, mod)
	p.run = c.wrap(p.run)
	return p, ns, c
}

// resync is what one Resync did: tool runs and statistics.
type resync struct {
	Saves, Restores, ReadsSkipped int
	Wrote                         bool
}

func doResync(t *testing.T, p *Proxier, c *toolCounter) resync {
	t.Helper()
	c.saves, c.restores = 0, 0
	st, err := p.Resync()
	if err != nil {
		t.Fatal(err)
	}
	return resync{Saves: c.saves, Restores: c.restores, ReadsSkipped: st.ReadsSkipped, Wrote: st.Rules+st.Chains+st.DeletedChains > 0}
}

// Reads of both families: three tables each.
var (
	skipped  = resync{ReadsSkipped: 2}
	compared = resync{Saves: 6}
	repaired = resync{Saves: 6, Restores: 1, Wrote: true}
)

// TestKernelResyncSkipsUnchanged: on nf_tables, a resync after the
// Proxier's own syncs reads nothing; any commit by someone else (a foreign
// chain, a hand deletion of one of our rules, an IPv6 change) makes the
// next resync read both families and repair what differs, after which
// resyncs skip again.
func TestKernelResyncSkipsUnchanged(t *testing.T) {
	p, ns, c := countingProxier(t, xtables.NFT, nil)
	specs := broad()
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	aff := []string{"-t", "nat", "-D", "KUBE-SERVICES", "-d", "10.96.0.50/32", "-p", "tcp",
		"-m", "comment", "--comment", "default/aff cluster IP", "-m", "tcp", "--dport", "80", "-j", ServiceChain("default/aff", "tcp")}
	steps := []struct {
		name   string
		before func()
		want   resync
	}{
		{"after the first sync", nil, skipped},
		{"again", nil, skipped},
		{"after a partial sync", func() {
			specs[1].eps = specs[1].eps[:1]
			s = next(s, specs...)
			st, err := p.Snapshot(s)
			if err != nil || st.Full {
				t.Fatalf("partial sync: %+v, %v", st, err)
			}
		}, skipped},
		{"foreign chain", func() {
			ns.MustRun(t, "iptables-nft", "-t", "nat", "-N", "SOMECHAIN")
			ns.MustRun(t, "iptables-nft", "-t", "nat", "-A", "SOMECHAIN", "-j", "RETURN")
		}, compared},
		{"after the compare", nil, skipped},
		{"our rule deleted by hand", func() { ns.MustRun(t, "iptables-nft", aff...) }, repaired},
		{"after the repair", nil, skipped},
		{"IPv6 chain flushed by hand", func() {
			ns.MustRun(t, "ip6tables-nft", "-t", "nat", "-F", "KUBE-POSTROUTING")
		}, repaired},
		{"after the IPv6 repair", nil, skipped},
	}
	for _, step := range steps {
		if step.before != nil {
			step.before()
		}
		if diff := cmp.Diff(step.want, doResync(t, p, c)); diff != "" {
			t.Errorf("%s: resync (-want +got):\n%s", step.name, diff)
		}
		if w := pendingWrites(t, p); w != "" {
			t.Fatalf("%s: the kernel differs from the ruleset; a resync would write:\n%s", step.name, w)
		}
	}
	if got := ns.MustRun(t, "iptables-nft", "-t", "nat", "-S", "SOMECHAIN"); !strings.Contains(got, "-A SOMECHAIN -j RETURN") {
		t.Errorf("foreign chain changed:\n%s", got)
	}
}

// TestKernelResyncForeignCommitDuringSync: a commit by someone else
// between the Proxier's restore and its reading of the generation
// (here: right after each restore, a hand deletion of one of our rules)
// is not taken for the Proxier's own: the next resync reads and repairs.
func TestKernelResyncForeignCommitDuringSync(t *testing.T) {
	p, ns, c := countingProxier(t, xtables.NFT, nil)
	specs := broad()
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"partial sync", "full snapshot"} {
		c.after = func() {
			c.after = nil
			ns.MustRun(t, "iptables-nft", "-t", "nat", "-F", "KUBE-MARK-MASQ")
		}
		specs[0].eps = specs[0].eps[:len(specs[0].eps)-1]
		s = next(s, specs...)
		if name == "full snapshot" {
			s.Full = true
		}
		if _, err := p.Snapshot(s); err != nil {
			t.Fatal(err)
		}
		if c.after != nil {
			t.Fatalf("%s: no restore", name)
		}
		if diff := cmp.Diff(repaired, doResync(t, p, c)); diff != "" {
			t.Errorf("%s: resync after a foreign commit during the sync (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(skipped, doResync(t, p, c)); diff != "" {
			t.Errorf("%s: resync after the repair (-want +got):\n%s", name, diff)
		}
	}
}

// TestKernelResyncForcedCompare: however still the generation, a resync
// compares at least every CompareEvery resyncs and every CompareInterval.
func TestKernelResyncForcedCompare(t *testing.T) {
	t.Run("every", func(t *testing.T) {
		p, _, c := countingProxier(t, xtables.NFT, func(c *Config) { c.CompareEvery = 3 })
		if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
			t.Fatal(err)
		}
		var got []resync
		for range 6 {
			got = append(got, doResync(t, p, c))
		}
		want := []resync{skipped, skipped, compared, skipped, skipped, compared}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("resyncs (-want +got):\n%s", diff)
		}
	})
	t.Run("interval", func(t *testing.T) {
		p, _, c := countingProxier(t, xtables.NFT, func(c *Config) { c.CompareEvery = 1000; c.CompareInterval = time.Minute })
		now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		p.gen.now = func() time.Time { return now }
		if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
			t.Fatal(err)
		}
		var got []resync
		for _, step := range []time.Duration{30 * time.Second, 29 * time.Second, time.Second, 59 * time.Second, time.Second} {
			now = now.Add(step)
			got = append(got, doResync(t, p, c))
		}
		// At 30 s, 59 s: skipped; at 60 s: compared; 119 s: skipped; 120 s: compared.
		want := []resync{skipped, skipped, compared, skipped, compared}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("resyncs (-want +got):\n%s", diff)
		}
	})
}

// TestKernelResyncLegacyCompares: the legacy backend has no generation:
// every resync reads the tables, as before.
func TestKernelResyncLegacyCompares(t *testing.T) {
	p, _, c := countingProxier(t, xtables.Legacy, nil)
	if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if diff := cmp.Diff(compared, doResync(t, p, c)); diff != "" {
			t.Errorf("resync %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestKernelResyncRenderErrorCompares: while a service cannot be
// rendered, every resync compares and reports it, as without the
// generation; once it is fixed, resyncs skip again.
func TestKernelResyncRenderErrorCompares(t *testing.T) {
	p, _, c := countingProxier(t, xtables.NFT, nil)
	specs := broad()
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	good := specs[0].ports
	specs[0].ports = []client.Port{{Protocol: "ICMP", Port: 80}}
	s = next(s, specs...)
	if _, err := p.Snapshot(s); err == nil {
		t.Fatal("partial sync of a bad service: no error")
	}
	for i := range 2 {
		c.saves = 0
		st, err := p.Resync()
		if err == nil || !strings.Contains(err.Error(), "default/web") || st.ReadsSkipped != 0 || c.saves != 6 {
			t.Errorf("resync %d with a bad service: %+v, %d saves, error %v; want a compare reporting default/web", i, st, c.saves, err)
		}
	}
	specs[0].ports = good
	if _, err := p.Snapshot(next(s, specs...)); err != nil {
		t.Fatal(err)
	}
	// The partial sync of the fix starts from an unknown kernel: the next
	// resync compares, the one after skips.
	got := []resync{doResync(t, p, c), doResync(t, p, c)}
	if diff := cmp.Diff([]resync{compared, skipped}, got); diff != "" {
		t.Errorf("resyncs once fixed (-want +got):\n%s", diff)
	}
}

// countHandler counts log records.
type countHandler struct{ n atomic.Int32 }

func (h *countHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countHandler) WithGroup(string) slog.Handler             { return h }

// TestKernelResyncGenerationUnreadable: a generation that cannot be read
// means a full compare at every resync, one warning, and no failed sync;
// once it reads again, resyncs skip.
func TestKernelResyncGenerationUnreadable(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	h := &countHandler{}
	p, ns, c := countingProxier(t, xtables.NFT, func(c *Config) { c.Log = slog.New(h) })
	read := nsGeneration(ns)
	p.gen.read = func() (uint32, error) {
		if broken.Load() {
			return 0, errors.New("no nfnetlink here")
		}
		return read()
	}
	if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
		t.Fatal(err)
	}
	got := []resync{doResync(t, p, c), doResync(t, p, c)}
	broken.Store(false)
	got = append(got, doResync(t, p, c), doResync(t, p, c))
	want := []resync{compared, compared, compared, skipped}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resyncs (-want +got):\n%s", diff)
	}
	if n := h.n.Load(); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}

// TestGenerationDefault: the current namespace's generation is used only
// when the tools run in it.
func TestGenerationDefault(t *testing.T) {
	gen := func() (uint32, error) { return 7, nil }
	run := func(string, []string, []byte) ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"tools here", Config{}, true},
		{"own runner", Config{Run: run}, false},
		{"own runner and generation", Config{Run: run, Generation: gen}, true},
		{"dry run", Config{DryRun: &strings.Builder{}, Generation: gen}, false},
	} {
		if got := newGenTracker(&tc.cfg).read != nil; got != tc.want {
			t.Errorf("%s: generation read %v, want %v", tc.name, got, tc.want)
		}
	}
}
