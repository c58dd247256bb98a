package seed

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
)

// service returns a ClusterIP service ns/name:http (TCP 80 -> 8080) with
// one ready endpoint per address in eps.
func service(name, clusterIP string, eps ...string) *client.ServiceEndpoints {
	svc := &client.Service{Namespace: "default", Name: name, Type: client.ClusterIP,
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr(clusterIP)}},
		Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}}}
	se := &client.ServiceEndpoints{Service: svc}
	for _, a := range eps {
		se.Endpoints = append(se.Endpoints, &client.Endpoint{Key: client.EndpointKey("Pod/default/" + a),
			IPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr(a)}}, Ready: true, Serving: true, Internal: true,
			PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}})
	}
	return se
}

// state is a small cluster, in key order.
func state() []*client.ServiceEndpoints {
	return []*client.ServiceEndpoints{
		service("api", "10.96.0.20", "10.244.1.7"),
		service("db", "10.96.0.30"),
		service("web", "10.96.0.10", "10.244.1.5", "10.244.2.6"),
	}
}

func dryRun(t *testing.T, out *bytes.Buffer, period time.Duration) *Proxier {
	t.Helper()
	p, err := NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, DryRun: out, SyncPeriod: period})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantFull is what iptables.Proxier writes for a full snapshot of
// state().
func wantFull(t *testing.T) string {
	t.Helper()
	var out bytes.Buffer
	p, err := iptables.NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, DryRun: &out})
	if err != nil {
		t.Fatal(err)
	}
	s := client.NewSnapshot(state(), nil)
	s.Full = true
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestFullStateUpdates: OnServiceUpdate and OnEndpointsUpdate, given the
// services in any order, write what a full snapshot of them writes.
func TestFullStateUpdates(t *testing.T) {
	want := wantFull(t)
	if !strings.Contains(want, `"default/web:http cluster IP"`) {
		t.Fatalf("the full snapshot programs no service:\n%s", want)
	}
	for _, tc := range []struct {
		name   string
		update func(*Proxier, []*client.ServiceEndpoints) error
	}{
		{"OnServiceUpdate", (*Proxier).OnServiceUpdate},
		{"OnEndpointsUpdate", (*Proxier).OnEndpointsUpdate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := dryRun(t, &out, 0)
			all := state()
			reversed := []*client.ServiceEndpoints{all[2], all[0], all[1]}
			if err := tc.update(p, reversed); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, out.String()); diff != "" {
				t.Errorf("restore input (-full snapshot +%s):\n%s", tc.name, diff)
			}
			if reversed[0] != all[2] {
				t.Errorf("%s reordered its argument", tc.name)
			}
		})
	}
}

// TestSync: Sync does nothing before any state, then resyncs the last
// state as Resync does.
func TestSync(t *testing.T) {
	var out bytes.Buffer
	p := dryRun(t, &out, 0)
	if err := p.Sync(); err != nil || out.Len() != 0 {
		t.Fatalf("Sync before any state: %v, wrote %q", err, out.String())
	}
	if err := p.OnServiceUpdate(state()); err != nil {
		t.Fatal(err)
	}
	first := out.String()
	out.Reset()
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := out.String()
	out.Reset()
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(out.String(), synced); diff != "" {
		t.Errorf("Sync (-Resync +Sync):\n%s", diff)
	}
	if diff := cmp.Diff(first, synced); diff != "" {
		t.Errorf("a dry-run Sync of the same state (-first sync +Sync):\n%s", diff)
	}
	if tot := p.Totals(); tot.Restores != 3 {
		t.Errorf("Totals().Restores = %d, want 3", tot.Restores)
	}
}

// TestSyncLoop: SyncLoop resyncs every period until its context ends and
// reports each failed sync.
func TestSyncLoop(t *testing.T) {
	t.Run("resyncs", func(t *testing.T) {
		var out bytes.Buffer
		p := dryRun(t, &out, 10*time.Millisecond)
		if err := p.OnServiceUpdate(state()); err != nil {
			t.Fatal(err)
		}
		before := p.Totals().Restores
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		p.SyncLoop(ctx, func(err error) { t.Error(err) })
		if p.Totals().Restores <= before {
			t.Error("SyncLoop made no resync in 100ms with a 10ms period")
		}
	})
	t.Run("reports errors", func(t *testing.T) {
		boom := errors.New("boom")
		run := func(string, []string, []byte) ([]byte, error) { return nil, boom }
		p, err := NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, Backend: xtables.NFT, Run: run,
			SyncPeriod: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.OnEndpointsUpdate(state()); !errors.Is(err, boom) {
			t.Fatalf("OnEndpointsUpdate with failing tools: %v, want %v", err, boom)
		}
		var reported atomic.Int32
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		p.SyncLoop(ctx, func(err error) {
			if !errors.Is(err, boom) {
				t.Errorf("reported %v, want %v", err, boom)
			}
			reported.Add(1)
		})
		if reported.Load() == 0 {
			t.Error("SyncLoop reported no error in 100ms with a 10ms period and failing tools")
		}
	})
}

type version string

func (v version) GetVersion() (string, error) { return string(v), nil }

type kernel struct{ err error }

func (k kernel) IsCompatible() error { return k.err }

// TestReexports: the seed's package-level functions are iptables'.
func TestReexports(t *testing.T) {
	noKernel := errors.New("no route_localnet")
	for _, tc := range []struct {
		v    version
		k    kernel
		ok   bool
		want error
	}{
		{"1.8.9", kernel{}, true, nil},
		{"1.8.9", kernel{noKernel}, false, noKernel},
	} {
		ok, err := CanUseIPTablesProxier(tc.v, tc.k)
		if ok != tc.ok || !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("CanUseIPTablesProxier(%s, %v) = %v, %v; want %v, %v", tc.v, tc.k.err, ok, err, tc.ok, tc.want)
		}
	}
	var _ KernelCompatTester = LinuxKernelCompatTester{}
	boom := errors.New("boom")
	var ran []string
	run := func(name string, args []string, _ []byte) ([]byte, error) {
		ran = append(ran, name)
		return nil, boom
	}
	if err := CleanupLeftovers(run); !errors.Is(err, boom) {
		t.Errorf("CleanupLeftovers with failing tools: %v, want %v", err, boom)
	}
	if len(ran) == 0 || !strings.Contains(ran[0], "save") {
		t.Errorf("CleanupLeftovers ran %q, want iptables-save first", ran)
	}
	if KubeMarkMasqChain != "KUBE-MARK-MASQ" || KubeMarkDropChain != "KUBE-MARK-DROP" {
		t.Errorf("chain names %q, %q", KubeMarkMasqChain, KubeMarkDropChain)
	}
}
