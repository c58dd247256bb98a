package nftables

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// badKey is the service the quarantine tests make the kernel refuse.
var badKey = client.ServiceKey{Namespace: "bench", Name: "svc-000002"}

// variant returns service i of a generated cluster with m endpoints.
func variant(i, m int) *client.ServiceEndpoints { return generated(i+1, m, netip.Addr{}).Services()[i] }

// replaced returns s with the services of ses in place of s's of the
// same keys.
func replaced(s *client.Snapshot, ses ...*client.ServiceEndpoints) *client.Snapshot {
	out := s.Services()
	for _, se := range ses {
		i := slices.IndexFunc(out, func(x *client.ServiceEndpoints) bool { return x.Service.Key() == se.Service.Key() })
		out[i] = se
	}
	return client.NewSnapshot(out, nil)
}

// injectRule appends a rule the kernel refuses (a jump to a chain that
// does not exist) to the cluster chain of k in rs, copying what it
// changes (rulesets share their slices with the renderer).
func injectRule(rs *ruleset.Ruleset, k client.ServiceKey) {
	rs.Chains = slices.Clone(rs.Chains)
	for i := range rs.Chains {
		if c := &rs.Chains[i]; strings.HasPrefix(c.Name, "service-") && strings.Contains(c.Name, "-"+k.String()+"/") {
			c.Rules = append(slices.Clone(c.Rules), ruleset.Rule{Text: "jump no-such-chain"})
			return
		}
	}
	panic("no chain of " + k.String())
}

// serviceChain returns the listing's block of k's cluster chain.
func serviceChain(t *testing.T, listing string, k client.ServiceKey) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)\tchain service-[A-Z0-9]{8}-` + regexp.QuoteMeta(k.String()) + `/.*?\n\t}`).FindString(listing)
	if m == "" {
		t.Fatalf("no chain of %s in\n%s", k, listing)
	}
	return m
}

// TestKernelQuarantine: when the kernel refuses a rule of one service's
// chain, on the full path (render) and on the delta path, the sync does
// not fail: the other services' changes are written, the refused service
// keeps what the kernel had, and it is quarantined by name; it is
// retried with backoff, at once when it changes, and written (leaving
// the quarantine) once the kernel takes it.
func TestKernelQuarantine(t *testing.T) {
	for _, path := range []string{"render", "delta"} {
		t.Run(path, func(t *testing.T) {
			ns := nstest.New(t)
			cfg := generatedConfig()
			p := newKernelProxier(t, ns, cfg)
			now := time.Unix(1000, 0)
			p.quarantined().Now = func() time.Time { return now }
			var faulty *client.ServiceEndpoints // the version of badKey refused
			isFaulty := func(s *client.Snapshot) bool { se := s.Lookup(badKey); return se != nil && se == faulty }
			if path == "render" {
				p.delta = nil
				p.render = func(s *client.Snapshot, v6 bool) (*ruleset.Ruleset, error) {
					rs, err := ruleset.RenderFamily(s, &cfg, v6)
					if isFaulty(s) {
						injectRule(rs, badKey)
					}
					return rs, err
				}
			} else {
				r, last := p.renderer, false
				p.delta = func(s *client.Snapshot, v6 bool) (*ruleset.Delta, error) {
					d, err := r.RenderDelta(s, v6)
					last = isFaulty(s)
					if d != nil && last {
						d.Chains = slices.Clone(d.Chains)
						for i, c := range d.Chains {
							if strings.Contains(c.Name, "-"+badKey.String()+"/") && strings.HasPrefix(c.Name, "service-") {
								cc := *c
								cc.Rules = append(slices.Clone(c.Rules), ruleset.Rule{Text: "jump no-such-chain"})
								d.Chains[i] = &cc
							}
						}
					}
					return d, err
				}
				p.assemble = func(v6 bool) *ruleset.Ruleset {
					rs := r.Ruleset(v6)
					if last {
						injectRule(rs, badKey)
					}
					return rs
				}
			}
			quarantined := func() []string {
				var out []string
				for _, e := range p.Quarantined() {
					out = append(out, e.Kind+" "+e.Name)
				}
				return out
			}
			s0 := generated(5, 2, netip.Addr{})
			syncOK(t, p, s0)
			before := listing(t, ns, "ip")

			// Services 0 and 2 change; 2's change is refused.
			faulty = variant(2, 3)
			s1 := replaced(s0, variant(0, 3), faulty)
			st, err := p.Snapshot(s1)
			if err != nil || st.Failures == 0 {
				t.Fatalf("sync with one service refused: %+v, %v; want no error and the refusal counted", st, err)
			}
			if diff := cmp.Diff([]string{"Service bench/svc-000002"}, quarantined()); diff != "" {
				t.Fatalf("quarantined (-want +got):\n%s", diff)
			}
			after := listing(t, ns, "ip")
			if diff := cmp.Diff(serviceChain(t, before, badKey), serviceChain(t, after, badKey)); diff != "" {
				t.Errorf("the refused service's chain changed (-before +after):\n%s", diff)
			}
			held := replaced(s1, s0.Lookup(badKey))
			if diff := cmp.Diff(canonListing(reference(t, render4(t, held, cfg))), canonListing(after)); diff != "" {
				t.Fatalf("table: the others written, the refused one held (-want +got):\n%s", diff)
			}

			// Not due: nothing written; due: refused again, backoff doubled.
			if st, err := p.Retry(); err != nil || st.Transactions != 0 || len(quarantined()) != 1 {
				t.Errorf("retry before it is due: %+v, %v, quarantined %v", st, err, quarantined())
			}
			now = now.Add(time.Second)
			if _, err := p.Retry(); err != nil {
				t.Fatalf("retry refused again: %v", err)
			}
			if e := p.Quarantined(); len(e) != 1 || e[0].Attempts != 2 || e[0].Next.Sub(now) != 2*time.Second {
				t.Errorf("after a second refusal: %+v, want attempts 2 and the next retry in 2s", e)
			}
			if diff := cmp.Diff(after, listing(t, ns, "ip")); diff != "" {
				t.Errorf("table after a refused retry (-before +after):\n%s", diff)
			}

			// The refusal ends: a Resync writes it and empties the quarantine.
			faulty = nil
			if st, err := p.Resync(); err != nil || st.Transactions != 1 || len(quarantined()) != 0 {
				t.Fatalf("resync once the refusal ended: %+v, %v, quarantined %v", st, err, quarantined())
			}
			if diff := cmp.Diff(canonListing(reference(t, render4(t, s1, cfg))), canonListing(listing(t, ns, "ip"))); diff != "" {
				t.Fatalf("table after the resync (-want +got):\n%s", diff)
			}

			// Refused again, then changed: written at once, not due.
			faulty = variant(2, 4)
			s2 := replaced(s1, faulty)
			if _, err := p.Snapshot(s2); err != nil || len(quarantined()) != 1 {
				t.Fatalf("refused again: %v, quarantined %v", err, quarantined())
			}
			s3 := replaced(s2, variant(2, 1))
			if _, err := p.Snapshot(s3); err != nil || len(quarantined()) != 0 {
				t.Fatalf("changed and written: %v, quarantined %v", err, quarantined())
			}
			if diff := cmp.Diff(canonListing(reference(t, render4(t, s3, cfg))), canonListing(listing(t, ns, "ip"))); diff != "" {
				t.Fatalf("table after the change (-want +got):\n%s", diff)
			}
			// Every later sync is one of the renderer's Deltas again.
			if path == "delta" && !p.fams[0].synced {
				t.Errorf("the state is not the render's after the quarantine")
			}
		})
	}
}

// TestKernelQuarantineElement: an element the kernel refuses (a verdict
// to a chain that does not exist) is the service of its comment: it is
// quarantined and the rest written.
func TestKernelQuarantineElement(t *testing.T) {
	ns := nstest.New(t)
	cfg := generatedConfig()
	p := newKernelProxier(t, ns, cfg)
	var faulty *client.ServiceEndpoints
	p.delta = nil
	p.render = func(s *client.Snapshot, v6 bool) (*ruleset.Ruleset, error) {
		rs, err := ruleset.RenderFamily(s, &cfg, v6)
		if se := s.Lookup(badKey); se != nil && se == faulty {
			rs.Sets = slices.Clone(rs.Sets)
			for i := range rs.Sets {
				if set := &rs.Sets[i]; set.Name == "no-endpoint-services" {
					set.Elements = append(slices.Clone(set.Elements), ruleset.Element{Key: "10.96.0.2 . tcp . 81",
						Value: "goto no-such-chain", Comment: "bench/svc-000002:http"})
				}
			}
		}
		return rs, err
	}
	s0 := generated(5, 2, netip.Addr{})
	syncOK(t, p, s0)
	faulty = variant(2, 3)
	s1 := replaced(s0, variant(0, 3), faulty)
	if _, err := p.Snapshot(s1); err != nil {
		t.Fatalf("sync with one element refused: %v", err)
	}
	if e := p.Quarantined(); len(e) != 1 || e[0].Name != "bench/svc-000002" || !strings.Contains(e[0].Err.Error(), "no-endpoint-services") {
		t.Fatalf("quarantined %+v, want bench/svc-000002 for its element", e)
	}
	held := replaced(s1, s0.Lookup(badKey))
	if diff := cmp.Diff(canonListing(reference(t, render4(t, held, cfg))), canonListing(listing(t, ns, "ip"))); diff != "" {
		t.Fatalf("table: the others written, the refused one held (-want +got):\n%s", diff)
	}
}
