package iptables

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// refusingRunner runs the commands in a namespace; while on, every
// iptables-restore input has the rules of service default/aff made into
// rules iptables-restore refuses (a probability out of range), as a
// kernel or tool refusing one service's rule would, the line numbers
// unchanged. tries counts the restores that carried them.
type refusingRunner struct {
	run   xtables.Runner
	mu    sync.Mutex
	on    bool
	tries int
}

func (r *refusingRunner) set(on bool) { r.mu.Lock(); r.on = on; r.mu.Unlock() }

func (r *refusingRunner) count() int { r.mu.Lock(); defer r.mu.Unlock(); return r.tries }

func (r *refusingRunner) Run(name string, args []string, stdin []byte) ([]byte, error) {
	r.mu.Lock()
	on := r.on
	r.mu.Unlock()
	if on && strings.Contains(name, "restore") && bytes.Contains(stdin, []byte(`"default/aff`)) {
		var out [][]byte
		for _, l := range bytes.Split(stdin, []byte("\n")) {
			if bytes.Contains(l, []byte(`"default/aff`)) && (bytes.HasPrefix(l, []byte("-A KUBE-SVC-")) || bytes.HasPrefix(l, []byte("-A KUBE-SEP-"))) {
				l = bytes.Replace(l, []byte("-m comment"), []byte("-m statistic --mode random --probability 2.5 -m comment"), 1)
			}
			out = append(out, l)
		}
		stdin = bytes.Join(out, []byte("\n"))
		r.mu.Lock()
		r.tries++
		r.mu.Unlock()
	}
	return r.run(name, args, stdin)
}

// TestKernelQuarantine: when iptables-restore refuses one service's rule,
// the service is quarantined by name and the rest of the node is
// programmed without failing the sync: a service never written is left
// out, one written keeps its rules as they were; it is retried alone
// after 1 s, then 2 s, not at other services' changes, at once when it
// changes, and is programmed once the refusal ends.
func TestKernelQuarantine(t *testing.T) {
	for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		t.Run(string(b), func(t *testing.T) {
			var rr *refusingRunner
			p, _ := kernelProxier(t, b, func(c *Config) {
				rr = &refusingRunner{run: c.Run, on: true}
				c.Run, c.CompareEvery = rr.Run, 1
			})
			now := time.Unix(1000, 0)
			p.q.Now = func() time.Time { return now }
			specs := broad()
			aff := -1
			for i, s := range specs {
				if s.name == "aff" {
					aff = i
				}
			}
			quarantined := func() []string {
				var out []string
				for _, e := range p.Quarantined() {
					out = append(out, e.Kind+" "+e.Name)
				}
				return out
			}
			// A first sync: aff left out, the rest programmed.
			s := snapshot(specs...)
			if _, err := p.Snapshot(s); err != nil {
				t.Fatalf("first sync with aff refused: %v", err)
			}
			if got := quarantined(); len(got) != 1 || got[0] != "Service default/aff" {
				t.Fatalf("quarantined %v, want Service default/aff", got)
			}
			if k := saveAll(t, p); strings.Contains(k, `"default/aff`) || !strings.Contains(k, `"default/web`) {
				t.Fatalf("kernel after the first sync: want default/web and no default/aff:\n%s", k)
			}
			// Fault gone, retry due: programmed.
			rr.set(false)
			now = now.Add(time.Second)
			if _, err := p.Retry(); err != nil || len(quarantined()) != 0 || !strings.Contains(saveAll(t, p), "10.244.1.11") {
				t.Fatalf("retry after the refusal ended: err %v, quarantined %v", err, quarantined())
			}
			// A refused change of aff beside a change of web: web's is
			// programmed, aff keeps its rules.
			rr.set(true)
			specs[aff].eps = append(specs[aff].eps, ep{ip: "10.244.1.99"})
			specs[0].eps = append(specs[0].eps, ep{ip: "10.244.1.98"})
			s = next(s, specs...)
			if _, err := p.Snapshot(s); err != nil {
				t.Fatalf("sync with aff's change refused: %v", err)
			}
			k := saveAll(t, p)
			if !strings.Contains(k, "10.244.1.98") || !strings.Contains(k, "10.244.1.11") || strings.Contains(k, "10.244.1.99") {
				t.Fatalf("kernel: want web's new endpoint and aff's old rules only:\n%s", k)
			}
			// Another service changes: aff is not tried.
			tries := rr.count()
			specs[0].eps = specs[0].eps[:len(specs[0].eps)-1]
			s = next(s, specs...)
			if _, err := p.Snapshot(s); err != nil || rr.count() != tries || strings.Contains(saveAll(t, p), "10.244.1.98") {
				t.Fatalf("unrelated change: err %v, aff tried %d times; want web's change alone", err, rr.count()-tries)
			}
			if _, err := p.Retry(); err != nil || rr.count() != tries {
				t.Fatalf("retry before 1 s: err %v, %d tries", err, rr.count()-tries)
			}
			// Due after 1 s: tried alone, refused, next after 2 s.
			now = now.Add(time.Second)
			if _, err := p.Retry(); err != nil || rr.count() != tries+1 {
				t.Fatalf("retry at 1 s: err %v, %d tries; want 1", err, rr.count()-tries)
			}
			if e := p.Quarantined(); len(e) != 1 || e[0].Next.Sub(now) != 2*time.Second || e[0].Attempts != 2 {
				t.Fatalf("after the second refusal: %+v; want a retry in 2 s", e)
			}
			// aff changes: tried at once.
			specs[aff].eps = specs[aff].eps[:1]
			s = next(s, specs...)
			if _, err := p.Snapshot(s); err != nil || rr.count() == tries+1 {
				t.Fatalf("aff changed: err %v, not tried", err)
			}
			// The refusal ends: programmed at the next retry, converged.
			rr.set(false)
			now = now.Add(time.Minute)
			if _, err := p.Retry(); err != nil || len(quarantined()) != 0 {
				t.Fatalf("retry after the refusal ended: err %v, quarantined %v", err, quarantined())
			}
			if k := saveAll(t, p); strings.Contains(k, "10.244.1.99") || !strings.Contains(k, "10.244.1.11") {
				t.Fatalf("kernel after the refusal ended:\n%s", k)
			}
			// A quarantined service written by a change leaves at once.
			rr.set(true)
			specs[aff].eps = append(specs[aff].eps, ep{ip: "10.244.1.97"})
			s = next(s, specs...)
			if _, err := p.Snapshot(s); err != nil || len(quarantined()) != 1 {
				t.Fatalf("aff refused again: err %v, quarantined %v", err, quarantined())
			}
			rr.set(false)
			specs[aff].eps = specs[aff].eps[:1]
			s = next(s, specs...)
			if _, err := p.Snapshot(s); err != nil || len(quarantined()) != 0 {
				t.Fatalf("aff changed and written: err %v, quarantined %v", err, quarantined())
			}
			if st, err := p.Resync(); err != nil || st.Restores != 0 {
				t.Fatalf("resync after convergence: %+v, %v; want nothing written", st, err)
			}
			// A failure that is no one service's still fails the sync.
			p.run = func(string, []string, []byte) ([]byte, error) {
				return nil, errors.New("iptables-restore: exec: killed")
			}
			if _, err := p.Resync(); err == nil {
				t.Fatal("a sync failing as a whole reported no error")
			}
		})
	}
}
