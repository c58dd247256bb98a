package ruleset

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
)

// mutate returns a copy of services (sorted by key) with a few services
// changed, removed or added, as a source's next snapshot would hold them.
func mutate(rng *rand.Rand, services []*client.ServiceEndpoints, extra []*client.ServiceEndpoints) []*client.ServiceEndpoints {
	out := slices.Clone(services)
	for range 1 + rng.IntN(4) {
		if len(out) == 0 {
			break
		}
		i := rng.IntN(len(out))
		se := *out[i]
		svc := *se.Service
		switch rng.IntN(5) {
		case 0: // an endpoint fewer
			if n := len(se.Endpoints); n > 0 {
				se.Endpoints = se.Endpoints[:n-1]
			}
		case 1: // affinity toggled
			if svc.SessionAffinity == nil {
				svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 30}
			} else {
				svc.SessionAffinity = nil
			}
		case 2: // an external IP more
			svc.ExternalIPs = client.IPs{V4: []netip.Addr{nthAddr("192.0.2.200", rng.IntN(50))}}
		case 3: // removed
			out = slices.Delete(out, i, i+1)
			continue
		case 4: // the same content, a new pointer
		}
		se.Service = &svc
		out[i] = &se
	}
	if len(extra) > 0 && rng.IntN(2) == 0 {
		add := extra[rng.IntN(len(extra))]
		if i, found := slices.BinarySearchFunc(out, add.Service.Key(), func(se *client.ServiceEndpoints, k client.ServiceKey) int {
			return se.Service.Key().Compare(k)
		}); !found {
			out = slices.Insert(out, i, add)
		}
	}
	return out
}

// TestRendererMatchesRender: over a random sequence of snapshots, the
// Renderer's output is Render's, after configuration changes too.
func TestRendererMatchesRender(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	services := generated(120, 3, true).Services()
	extra := generated(240, 2, true).Services()[120:]
	cfg := Config{}
	r, err := NewRenderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	byFamily, err := NewRenderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 60 {
		if step == 30 {
			cfg = Config{MasqueradeAll: true, IPv4: Family{NodeIP: netip.MustParseAddr("192.168.7.7")}}
			cfg.SetNodePorts([]netip.Prefix{netip.MustParsePrefix("192.168.7.7/32")}, []netip.Addr{netip.MustParseAddr("192.168.7.7")})
			if err := errors.Join(r.SetConfig(cfg), byFamily.SetConfig(cfg)); err != nil {
				t.Fatal(err)
			}
		}
		services = mutate(rng, services, extra)
		s := client.NewSnapshot(services, nil)
		got4, got6, err := r.Render(s)
		if err != nil {
			t.Fatal(err)
		}
		want4, want6, err := Render(s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want4, got4); diff != "" {
			t.Fatalf("step %d: ip (-Render +Renderer):\n%s", step, diff)
		}
		if diff := cmp.Diff(want6, got6); diff != "" {
			t.Fatalf("step %d: ip6 (-Render +Renderer):\n%s", step, diff)
		}
		// One family at a time: the other's state is its own.
		if fam, err := byFamily.RenderFamily(s, step%3 == 0); err != nil {
			t.Fatal(err)
		} else if diff := cmp.Diff(map[bool]*Ruleset{false: want4, true: want6}[step%3 == 0], fam); diff != "" {
			t.Fatalf("step %d: RenderFamily (-Render +Renderer):\n%s", step, diff)
		}
	}
	if err := r.SetConfig(Config{MasqueradeBit: new(40)}); err == nil {
		t.Error("SetConfig took masquerade bit 40")
	}
}

// BenchmarkRendererOneChange renders 10,000 services x 10 endpoints after
// one service changed (a new pointer), as a sink's sync after one
// EndpointSlice update does.
func BenchmarkRendererOneChange(b *testing.B) {
	services := generated(10000, 10, false).Services()
	r, err := NewRenderer(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := r.Render(client.NewSnapshot(services, nil)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		services = slices.Clone(services)
		se := *services[i%len(services)]
		services[i%len(services)] = &se
		i++
		if _, _, err := r.Render(client.NewSnapshot(services, nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderDeltaOneChange is BenchmarkRendererOneChange with
// RenderDelta (one family): the change, not the ruleset.
func BenchmarkRenderDeltaOneChange(b *testing.B) {
	services := generated(10000, 10, false).Services()
	r, err := NewRenderer(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.RenderDelta(client.NewSnapshot(services, nil), false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	alt := generated(10000, 9, false).Services()
	i := 0
	for b.Loop() {
		services = slices.Clone(services)
		j := i % len(services)
		services[j], alt[j] = alt[j], services[j]
		i++
		d, err := r.RenderDelta(client.NewSnapshot(services, nil), false)
		if err != nil {
			b.Fatal(err)
		}
		if d == nil || len(d.Chains) == 0 {
			b.Fatalf("one service changed: Delta %+v", d)
		}
	}
}
