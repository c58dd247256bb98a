package iptablessink

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

func service(name, ip string, eps ...string) *client.ServiceEndpoints {
	svc := &client.Service{Namespace: "default", Name: name, Type: client.ClusterIP,
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr(ip)}},
		Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}}}
	se := &client.ServiceEndpoints{Service: svc}
	for _, e := range eps {
		se.Endpoints = append(se.Endpoints, &client.Endpoint{Key: client.EndpointKey("Pod/default/" + e), IPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr(e)}},
			Ready: true, Serving: true, Internal: true, External: true,
			PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}})
	}
	return se
}

// fakeTables is an iptables whose restores fail on demand; its save
// prints nothing (empty tables).
type fakeTables struct {
	fail     bool
	restores int
}

func (f *fakeTables) run(name string, _ []string, _ []byte) ([]byte, error) {
	if strings.HasSuffix(name, "-restore") {
		f.restores++
		if f.fail {
			return nil, errors.New("iptables-restore: line 3 failed")
		}
	}
	return nil, nil
}

// TestMetrics: the controller counts failed restores (all, and those of
// partial syncs) under kube-proxy's names, sets the rules gauge per table
// from the Proxier, and reports the sync to the runtime.
func TestMetrics(t *testing.T) {
	ft := &fakeTables{}
	p, err := iptables.NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, Backend: xtables.NFT, Run: ft.run})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var synced []runtime.SyncStats
	c := &Controller{P: p, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSync: func(st runtime.SyncStats) { synced = append(synced, st) }}
	a, b := service("a", "10.96.0.1", "10.244.0.1"), service("b", "10.96.0.2", "10.244.0.2", "10.244.0.3")
	s1 := client.NewSnapshot([]*client.ServiceEndpoints{a, b}, nil)
	c.Snapshot(s1)
	b2 := service("b", "10.96.0.2", "10.244.0.2")
	ft.fail = true
	c.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{a, b2}, []client.Change{{Key: b2.Service.Key(), Service: b2}})) // partial, fails
	c.Resync()                                                                                                               // full, fails
	ft.fail = false
	c.Resync()

	type counts struct {
		RestoreFailures, PartialRestoreFailures float64
		FullSyncs, PartialSyncs                 uint64
	}
	got := counts{testutil.ToFloat64(m.RestoreFailures.WithLabelValues("IPv4")), testutil.ToFloat64(m.PartialRestoreFailures.WithLabelValues("IPv4")),
		samples(t, m.FullDuration.WithLabelValues("IPv4").(prometheus.Histogram)), samples(t, m.PartialDuration.WithLabelValues("IPv4").(prometheus.Histogram))}
	if diff := cmp.Diff(counts{RestoreFailures: 2, PartialRestoreFailures: 1, FullSyncs: 3, PartialSyncs: 1}, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if ft.restores != 4 {
		t.Errorf("%d restores, want 4", ft.restores)
	}
	want := p.RulesTotal()
	if want["nat"] == 0 {
		t.Fatalf("RulesTotal %v: want nat rules", want)
	}
	for table, n := range want {
		if g := testutil.ToFloat64(m.RulesTotal.WithLabelValues(table, "IPv4")); g != float64(n) {
			t.Errorf("kubeproxy_sync_proxy_rules_iptables_total{table=%q,ip_family=\"IPv4\"} = %v, want %d", table, g, n)
		}
	}
	if n := testutil.CollectAndCount(m.RestoreFailures) + testutil.CollectAndCount(m.FullDuration); n != 2 {
		t.Errorf("%d series of the failures and the full syncs, want one each (IPv4: the only family programmed)", n)
	}
	if len(synced) != 4 || synced[0].Err != nil || synced[0].Writes == 0 || synced[1].Err == nil || synced[2].Err == nil || synced[3].Err != nil {
		t.Errorf("reported syncs %+v: want ok (writes), failed, failed, ok", synced)
	}
}

// TestMetricsReadsSkipped: a resync the Proxier skips (nf_tables
// generation unchanged) is counted in
// proxysinks_iptables_resync_reads_skipped_total and reads nothing.
func TestMetricsReadsSkipped(t *testing.T) {
	var saves int
	var gen uint32
	// A fake nf_tables kernel whose tables read back empty: every restore
	// commits one transaction per table section.
	run := func(name string, _ []string, stdin []byte) ([]byte, error) {
		switch {
		case strings.HasSuffix(name, "-save"):
			saves++
		case strings.HasSuffix(name, "-restore"):
			gen += uint32(strings.Count(string(stdin), "COMMIT\n"))
		}
		return nil, nil
	}
	p, err := iptables.NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, Backend: xtables.NFT, Run: run,
		Generation: func() (uint32, error) { return gen, nil }})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{P: p, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{service("a", "10.96.0.1", "10.244.0.1")}, nil))
	saves = 0
	c.Resync()
	c.Resync()
	if got := testutil.ToFloat64(m.ReadsSkipped); got != 2 || saves != 0 {
		t.Errorf("after two idle resyncs: %v reads skipped, %d saves; want 2 and 0", got, saves)
	}
	gen++ // someone else commits
	c.Resync()
	if got := testutil.ToFloat64(m.ReadsSkipped); got != 2 || saves != 3 {
		t.Errorf("after a foreign commit: %v reads skipped, %d saves; want 2 and 3 (the tables read)", got, saves)
	}
}

// samples returns the observations of a histogram.
func samples(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestProxierConfig: the runtime's flags and node addresses map to the
// Proxier's configuration.
func TestProxierConfig(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00::10")
	tests := []struct {
		name string
		env  runtime.Env
		want iptables.Config
	}{
		{"IPv4 node", runtime.Env{Config: runtime.Config{MasqueradeBit: 14}, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}},
			iptables.Config{IPv4: true, MasqueradeBit: 14, NodeIPs: []netip.Addr{v4}, NodePortIPs: []netip.Addr{v4}}},
		{"dual-stack node, --nodeport-addresses", runtime.Env{Config: runtime.Config{MasqueradeBit: 3, MasqueradeAll: true},
			NodePorts: runtime.NodePorts{CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00::/64")}, Addrs: []netip.Addr{v6}}},
			iptables.Config{IPv4: true, IPv6: true, MasqueradeBit: 3, MasqueradeAll: true, NodeIPs: []netip.Addr{v6},
				NodePortCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00::/64")}, NodePortIPs: []netip.Addr{v6}}},
		{"--node-address wins for NodeIPs", runtime.Env{Config: runtime.Config{NodeAddresses: []netip.Addr{v4, v6}}, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}},
			iptables.Config{IPv4: true, IPv6: true, NodeIPs: []netip.Addr{v4, v6}, NodePortIPs: []netip.Addr{v4}}},
		{"--bind-address first for NodeIPs", runtime.Env{Config: runtime.Config{BindAddress: netip.MustParseAddr("192.168.1.20")}, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}},
			iptables.Config{IPv4: true, NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.1.20"), v4}, NodePortIPs: []netip.Addr{v4}}},
	}
	for _, tt := range tests {
		got := ProxierConfig(tt.env)
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestLocalhostNodePorts: IPv4 node ports are served on 127.0.0.0/8 as
// kube-proxy decides it: --iptables-localhost-nodeports (default true)
// and --nodeport-addresses unset for IPv4 or holding loopback; a CIDR
// that holds 127.0.0.1 adds it to the node-port addresses.
func TestLocalhostNodePorts(t *testing.T) {
	pfx, lo := netip.MustParsePrefix, netip.MustParseAddr("127.0.0.1")
	v4 := netip.MustParseAddr("192.168.1.10")
	on := Config{LocalhostNodePorts: true}
	for _, tt := range []struct {
		name    string
		flag    Config
		cidrs   []netip.Prefix
		want    bool
		wantIPs []netip.Addr
	}{
		{"default", on, nil, true, []netip.Addr{v4}},
		{"flag off", Config{}, nil, false, []netip.Addr{v4}},
		{"IPv6 CIDR only: IPv4 unrestricted", on, []netip.Prefix{pfx("fd00::/64")}, true, []netip.Addr{v4}},
		{"IPv4 CIDR without loopback", on, []netip.Prefix{pfx("192.168.1.0/24")}, false, []netip.Addr{v4}},
		{"loopback CIDR", on, []netip.Prefix{pfx("192.168.1.0/24"), pfx("127.0.0.0/8")}, true, []netip.Addr{v4, lo}},
		{"0.0.0.0/0", on, []netip.Prefix{pfx("0.0.0.0/0")}, true, []netip.Addr{v4, lo}},
		{"loopback CIDR, flag off", Config{}, []netip.Prefix{pfx("127.0.0.0/8")}, false, []netip.Addr{v4}},
		// primary: the IPv4 primary's /32, never loopback (kube-proxy
		// settings differential, e2e/hostnode).
		{"primary", on, nil, false, []netip.Addr{v4}},
		{"primary and loopback", on, []netip.Prefix{pfx("127.0.0.0/8")}, true, []netip.Addr{v4, lo}},
	} {
		primary := strings.HasPrefix(tt.name, "primary")
		env := runtime.Env{Config: runtime.Config{NodePortAddresses: tt.cidrs, NodePortPrimary: primary, SinkConfig: tt.flag}, NodePorts: runtime.NodePorts{CIDRs: tt.cidrs, Addrs: []netip.Addr{v4}}}
		got := ProxierConfig(env)
		if got.LocalhostNodePorts != tt.want || !cmp.Equal(got.NodePortIPs, tt.wantIPs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
			t.Errorf("%s: localhost node ports %v on %v, want %v on %v", tt.name, got.LocalhostNodePorts, got.NodePortIPs, tt.want, tt.wantIPs)
		}
	}
}

// TestNoLocalEndpoints: services with a Local policy and no ready or
// serving local endpoint are counted and reported with the sync.
func TestNoLocalEndpoints(t *testing.T) {
	local := func(name, ip string, policyLocal, epLocal bool) *client.ServiceEndpoints {
		se := service(name, ip, "10.244.0.9")
		se.Service.InternalTrafficLocal = policyLocal
		se.Endpoints[0].Local = epLocal
		return se
	}
	s := client.NewSnapshot([]*client.ServiceEndpoints{
		local("a", "10.96.0.1", true, false), // counted
		local("b", "10.96.0.2", true, true),
		local("c", "10.96.0.3", false, false),
		local("d", "10.96.0.4", true, false), // counted
	}, nil)
	p, err := iptables.NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, DryRun: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	c := &Controller{P: p, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSync: func(st runtime.SyncStats) { got = append(got, st.NoLocalEndpoints) }}
	c.Snapshot(s)
	c.Resync()
	if diff := cmp.Diff([]int{2, 2}, got); diff != "" {
		t.Errorf("no-local-endpoint services of a snapshot and its resync (-want +got):\n%s", diff)
	}
}
