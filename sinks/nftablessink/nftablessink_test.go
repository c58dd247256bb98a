package nftablessink

import (
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

var addrCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreUnexported(xtables.LocalTraffic{}),
	cmpopts.IgnoreFields(nftables.Config{}, "Log", "DryRun"),
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

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

// TestProxierConfig: the runtime's flags and node addresses map to the
// Proxier's configuration: the masquerade settings, the families, the
// node IP of each family, and the NodePort addresses per family
// (restricted where --nodeport-addresses has a CIDR of the family, as
// primary gives one).
func TestProxierConfig(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00::10")
	pfx := netip.MustParsePrefix
	tests := []struct {
		name string
		env  runtime.Env
		want nftables.Config
	}{
		{"IPv4 node, unrestricted; the sync period bounds the quarantine's backoff", runtime.Env{Config: runtime.Config{MasqueradeBit: 14, SyncPeriod: 30 * time.Second},
			NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}},
			nftables.Config{IPv4: true, SyncPeriod: 30 * time.Second, Ruleset: ruleset.Config{MasqueradeBit: new(14), IPv4: ruleset.Family{NodeIP: v4, NodePortAddrs: []netip.Addr{v4}}}}},
		{"primary (a /32 and a /128)", runtime.Env{Config: runtime.Config{MasqueradeBit: 3, MasqueradeAll: true},
			NodePorts: runtime.NodePorts{CIDRs: []netip.Prefix{pfx("192.168.1.10/32"), pfx("fd00::10/128")}, Addrs: []netip.Addr{v4, v6}}},
			nftables.Config{IPv4: true, IPv6: true, Ruleset: ruleset.Config{MasqueradeBit: new(3), MasqueradeAll: true,
				IPv4: ruleset.Family{NodeIP: v4, NodePortsRestricted: true, NodePortAddrs: []netip.Addr{v4}},
				IPv6: ruleset.Family{NodeIP: v6, NodePortsRestricted: true, NodePortAddrs: []netip.Addr{v6}}}}},
		// Bit 0 (the zero Config here) is a bit kube-proxy accepts, not
		// its default.
		{"IPv6 restricted only", runtime.Env{NodePorts: runtime.NodePorts{CIDRs: []netip.Prefix{pfx("fd00::/64")}, Addrs: []netip.Addr{v4, v6}}},
			nftables.Config{IPv4: true, IPv6: true, Ruleset: ruleset.Config{MasqueradeBit: new(0),
				IPv4: ruleset.Family{NodeIP: v4, NodePortAddrs: []netip.Addr{v4}},
				IPv6: ruleset.Family{NodeIP: v6, NodePortsRestricted: true, NodePortAddrs: []netip.Addr{v6}}}}},
		{"--node-address wins for the node IPs", runtime.Env{Config: runtime.Config{NodeAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.11"), v6}},
			NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}},
			nftables.Config{IPv4: true, IPv6: true, Ruleset: ruleset.Config{MasqueradeBit: new(0), IPv4: ruleset.Family{NodeIP: netip.MustParseAddr("192.168.1.11"), NodePortAddrs: []netip.Addr{v4}},
				IPv6: ruleset.Family{NodeIP: v6}}}},
		{"--bind-address first", runtime.Env{Config: runtime.Config{BindAddress: netip.MustParseAddr("192.168.1.20")}, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}},
			nftables.Config{IPv4: true, Ruleset: ruleset.Config{MasqueradeBit: new(0), IPv4: ruleset.Family{NodeIP: netip.MustParseAddr("192.168.1.20"), NodePortAddrs: []netip.Addr{v4}}}}},
	}
	for _, tt := range tests {
		got := ProxierConfig(tt.env)
		if diff := cmp.Diff(tt.want, got, addrCmp); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	t.Setenv(SkipKernelVersionEnv, "1")
	if got := ProxierConfig(runtime.Env{}); !got.SkipKernelVersionCheck {
		t.Errorf("%s=1: the kernel version check is not skipped", SkipKernelVersionEnv)
	}
}

// TestLocalTraffic: --detect-local-mode reaches the ruleset: ClusterCIDR
// at once, NodeCIDR from the Node of every snapshot (Controller.Local).
func TestLocalTraffic(t *testing.T) {
	cidr := netip.MustParsePrefix("10.244.0.0/16")
	cfg := ProxierConfig(runtime.Env{Config: runtime.Config{ClusterCIDRs: []netip.Prefix{cidr}}})
	if want, _ := xtables.NewLocalTraffic(xtables.LocalClusterCIDR, []netip.Prefix{cidr}, ""); !cmp.Equal(cfg.Ruleset.Local, want, cmp.AllowUnexported(xtables.LocalTraffic{}), addrCmp) {
		t.Errorf("ClusterCIDR: local traffic %+v, want %+v", cfg.Ruleset.Local, want)
	}
	if nodeLocal(runtime.Config{DetectLocalMode: xtables.LocalClusterCIDR}) != nil {
		t.Error("ClusterCIDR: a per-Node detection")
	}
	if nodeLocal(runtime.Config{DetectLocalMode: xtables.LocalNodeCIDR}) == nil {
		t.Error("NodeCIDR: no per-Node detection")
	}
}

// TestMetricsObserve: one sync's duration is observed under every family
// the Proxier programs, in the full or the partial histogram; refused
// transactions and other writers' changes are counted under the family
// they happened in.
func TestMetricsObserve(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := nft.FamilyIPv4, nft.FamilyIPv6
	m.observe([]string{"IPv4", "IPv6"}, nftables.SyncStats{Full: true, Duration: time.Millisecond, Failures: 1, FailedFamilies: []nft.Family{v6},
		ForeignChanges: 2, ForeignFamilies: []nft.Family{v4, v6}})
	m.observe([]string{"IPv4"}, nftables.SyncStats{Duration: time.Millisecond, Failures: 2, FailedFamilies: []nft.Family{v4, v4},
		ForeignChanges: 1, ForeignFamilies: []nft.Family{v4}})
	m.observe([]string{"IPv6"}, nftables.SyncStats{Full: true})
	type counts struct{ Full4, Full6, Partial4, Partial6, Failures4, Failures6, Foreign4, Foreign6, Unlabelled int }
	val := func(c *prometheus.CounterVec, f string) int { return int(testutil.ToFloat64(c.WithLabelValues(f))) }
	got := counts{
		Full4: int(sampleCount(t, m.FullDuration, "IPv4")), Full6: int(sampleCount(t, m.FullDuration, "IPv6")), Partial4: int(sampleCount(t, m.PartialDuration, "IPv4")),
		Partial6:  int(sampleCount(t, m.PartialDuration, "IPv6")),
		Failures4: val(m.SyncFailures, "IPv4"), Failures6: val(m.SyncFailures, "IPv6"),
		Foreign4: val(m.ForeignChanges, "IPv4"), Foreign6: val(m.ForeignChanges, "IPv6"),
		Unlabelled: val(m.SyncFailures, "") + val(m.ForeignChanges, ""),
	}
	want := counts{Full4: 1, Full6: 2, Partial4: 1, Partial6: 0, Failures4: 2, Failures6: 1, Foreign4: 2, Foreign6: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if _, err := NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Errorf("a second registry: %v", err)
	}
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil || !strings.Contains(err.Error(), "register nftables metrics") {
		t.Errorf("registering twice: %v, want an error naming the metrics", err)
	}
}

// sampleCount returns the observations of a family's histogram.
func sampleCount(t *testing.T, h *prometheus.HistogramVec, family string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.WithLabelValues(family).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
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
	p, err := nftables.NewProxier(nftables.Config{IPv4: true, Ruleset: ruleset.Config{MasqueradeBit: new(14)}, DryRun: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	c := &Controller{P: p, Log: discard(), OnSync: func(st runtime.SyncStats) { got = append(got, st.NoLocalEndpoints) }}
	c.Snapshot(s)
	c.Resync()
	if diff := cmp.Diff([]int{2, 2}, got); diff != "" {
		t.Errorf("no-local-endpoint services of a snapshot and its resync (-want +got):\n%s", diff)
	}
}
