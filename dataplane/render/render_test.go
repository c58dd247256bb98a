package render

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// recorder keeps what Render emitted as sorted, de-duplicated lines; the
// records of virtual servers (rules.SetVirtualServers) apart, in records.
type recorder struct{ lines, records map[string]bool }

func (r *recorder) add(s string) {
	if r.lines == nil {
		r.lines = map[string]bool{}
	}
	r.lines[s] = true
}
func (r *recorder) Server(vs VirtualServer, o ServerOptions) {
	s := fmt.Sprintf("vs %s %s", vs, o.Scheduler)
	if o.Persistent {
		s += fmt.Sprintf(" persistent %d", o.Timeout)
	}
	r.add(s)
}
func (r *recorder) Destination(d Destination, o DestOptions) {
	r.add(fmt.Sprintf("dest %s w%d", d, o.Weight))
}
func (r *recorder) Bind(a netip.Addr) { r.add("bind " + a.String()) }
func (r *recorder) Entry(e SetEntry) {
	if e.Set == rules.SetVirtualServers || e.Set == rules.SetName(xtables.IPv6, rules.SetVirtualServers) {
		if r.records == nil {
			r.records = map[string]bool{}
		}
		r.records[fmt.Sprintf("%s/%s", e.Protocol, netip.AddrPortFrom(e.Addr, e.Port))] = true
		return
	}
	r.add("set " + e.String())
}
func (r *recorder) sorted(prefix string) []string {
	var out []string
	for l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

var (
	ip    = netip.MustParseAddr
	node4 = ip("192.168.1.10")
	node6 = ip("fd00:1::10")
)

func ips(addrs ...string) client.IPs {
	var out client.IPs
	for _, a := range addrs {
		out.Add(ip(a))
	}
	return out
}

func ep(key string, local, internal, external bool, addrs ...string) *client.Endpoint {
	return &client.Endpoint{Key: client.EndpointKey(key), IPs: ips(addrs...), Local: local, Ready: true, Serving: true,
		Internal: internal, External: external,
		PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}, {Name: "dns", Protocol: client.UDP, Port: 5353}, {Name: "sctp", Protocol: client.SCTP, Port: 9999}}}
}

func render(t *testing.T, se *client.ServiceEndpoints, cfg Config) *recorder {
	t.Helper()
	r := &recorder{}
	if errs := Render(se, cfg, r); len(errs) > 0 {
		t.Fatalf("Render errors: %v", errs)
	}
	return r
}

var nodeCfg = Config{Scheduler: "rr", Weight: 1, NodeAddresses: []netip.Addr{node4, node6, ip("127.0.0.1")}}

func TestClusterIP(t *testing.T) {
	se := &client.ServiceEndpoints{
		Service: &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP,
			ClusterIPs: ips("10.96.0.10"),
			Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPortName: "http"}}},
		Endpoints: []*client.Endpoint{
			ep("a", true, true, true, "10.244.1.5"),
			ep("b", false, true, true, "10.244.2.5"),
			ep("c", false, false, false, "10.244.3.5"), // not for this node
		},
	}
	r := render(t, se, nodeCfg)
	want := []string{
		"bind 10.96.0.10",
		"dest 10.244.1.5:8080 on TCP/10.96.0.10:80 w1",
		"dest 10.244.2.5:8080 on TCP/10.96.0.10:80 w1",
		"set KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
		"set KUBE-IPVS-IPS 10.96.0.10",
		"set KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5",
		"vs TCP/10.96.0.10:80 rr",
	}
	if diff := cmp.Diff(want, r.sorted("")); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestNodePortLocalDualStackAffinity(t *testing.T) {
	se := &client.ServiceEndpoints{
		Service: &client.Service{Namespace: "default", Name: "np", Type: client.NodePort,
			ClusterIPs:           ips("10.96.0.20", "fd00:96::20"),
			Ports:                []client.Port{{Name: "dns", Protocol: client.UDP, Port: 53, NodePort: 30053}},
			ExternalTrafficLocal: true, HealthCheckNodePort: 32000,
			SessionAffinity: &client.SessionAffinity{},
			Annotations:     map[string]string{SchedulerAnnotation: "mh"}},
		Endpoints: []*client.Endpoint{
			ep("a", true, true, true, "10.244.1.5", "fd00:244::5"),
			ep("b", false, true, false, "10.244.2.5"),
		},
	}
	r := render(t, se, nodeCfg)
	wantVS := []string{
		"vs UDP/10.96.0.20:53 mh persistent 10800",
		"vs UDP/192.168.1.10:30053 mh persistent 10800",
		"vs UDP/[fd00:1::10]:30053 mh persistent 10800",
		"vs UDP/[fd00:96::20]:53 mh persistent 10800",
	}
	if diff := cmp.Diff(wantVS, r.sorted("vs ")); diff != "" {
		t.Errorf("virtual servers (-want +got):\n%s", diff)
	}
	wantDest := []string{
		"dest 10.244.1.5:5353 on UDP/10.96.0.20:53 w1",
		"dest 10.244.1.5:5353 on UDP/192.168.1.10:30053 w1",
		"dest 10.244.2.5:5353 on UDP/10.96.0.20:53 w1",
		"dest [fd00:244::5]:5353 on UDP/[fd00:1::10]:30053 w1",
		"dest [fd00:244::5]:5353 on UDP/[fd00:96::20]:53 w1",
	}
	if diff := cmp.Diff(wantDest, r.sorted("dest ")); diff != "" {
		t.Errorf("destinations (-want +got):\n%s", diff)
	}
	wantSets := []string{
		"set KUBE-6-CLUSTER-IP fd00:96::20,udp:53",
		"set KUBE-6-HEALTH-CHECK-NODE-PORT 32000",
		"set KUBE-6-IPVS-IPS fd00:96::20",
		"set KUBE-6-LOOP-BACK fd00:244::5,udp:5353,fd00:244::5",
		"set KUBE-6-NODE-PORT-LOCAL-UDP 30053",
		"set KUBE-6-NODE-PORT-UDP 30053",
		"set KUBE-CLUSTER-IP 10.96.0.20,udp:53",
		"set KUBE-HEALTH-CHECK-NODE-PORT 32000",
		"set KUBE-IPVS-IPS 10.96.0.20",
		"set KUBE-LOOP-BACK 10.244.1.5,udp:5353,10.244.1.5",
		"set KUBE-NODE-PORT-LOCAL-UDP 30053",
		"set KUBE-NODE-PORT-UDP 30053",
	}
	if diff := cmp.Diff(wantSets, r.sorted("set ")); diff != "" {
		t.Errorf("set entries (-want +got):\n%s", diff)
	}
}

func TestLoadBalancerSourceRangesAndExternalIPs(t *testing.T) {
	se := &client.ServiceEndpoints{
		Service: &client.Service{Namespace: "shop", Name: "lb", Type: client.LoadBalancer,
			ClusterIPs:               ips("10.96.0.30"),
			ExternalIPs:              ips("203.0.113.7", "192.168.1.10"), // the second is the node's own
			LoadBalancerIPs:          ips("198.51.100.4"),
			LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("2001:db8::/32")},
			Ports:                    []client.Port{{Name: "sctp", Protocol: client.SCTP, Port: 7000, NodePort: 30700}}},
		Endpoints: []*client.Endpoint{ep("a", false, true, true, "10.244.2.5")},
	}
	r := render(t, se, nodeCfg)
	wantBind := []string{"bind 10.96.0.30", "bind 198.51.100.4", "bind 203.0.113.7"}
	if diff := cmp.Diff(wantBind, r.sorted("bind ")); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	wantSets := []string{
		"set KUBE-CLUSTER-IP 10.96.0.30,sctp:7000",
		"set KUBE-EXTERNAL-IP 192.168.1.10,sctp:7000",
		"set KUBE-EXTERNAL-IP 203.0.113.7,sctp:7000",
		"set KUBE-IPVS-IPS 10.96.0.30",
		"set KUBE-IPVS-IPS 198.51.100.4",
		"set KUBE-IPVS-IPS 203.0.113.7",
		"set KUBE-LOAD-BALANCER 198.51.100.4,sctp:7000",
		"set KUBE-LOAD-BALANCER-FW 198.51.100.4,sctp:7000",
		"set KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.4,sctp:7000,192.168.1.0/24",
		"set KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.4,sctp:7000,198.51.100.4",
		"set KUBE-NODE-PORT-SCTP-HASH 192.168.1.10,sctp:30700",
	}
	if diff := cmp.Diff(wantSets, r.sorted("set ")); diff != "" {
		t.Errorf("set entries (-want +got):\n%s", diff)
	}
	if n := len(r.sorted("vs ")); n != 5 { // cluster, 2 external, LB, node port (v4 only)
		t.Errorf("%d virtual servers, want 5: %q", n, r.sorted("vs "))
	}
}

func TestBadInput(t *testing.T) {
	se := &client.ServiceEndpoints{
		Service: &client.Service{Namespace: "default", Name: "odd", Type: client.ClusterIP,
			ClusterIPs:  ips("10.96.0.40"),
			Annotations: map[string]string{SchedulerAnnotation: "fastest"},
			Ports: []client.Port{
				{Name: "http", Protocol: client.TCP, Port: 80},
				{Name: "icmp", Protocol: "ICMP", Port: 1},
			}},
	}
	r := &recorder{}
	errs := Render(se, nodeCfg, r)
	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2: %v", len(errs), errs)
	}
	for i, want := range []string{`default/odd: annotation proxysinks.io/ipvs-scheduler: unknown IPVS scheduler "fastest"`, `default/odd: port "icmp" protocol`} {
		if !strings.Contains(errs[i].Error(), want) {
			t.Errorf("error %d = %q, want it to contain %q", i, errs[i], want)
		}
	}
	// The good port is still rendered, with the default scheduler.
	if diff := cmp.Diff([]string{"vs TCP/10.96.0.40:80 rr"}, r.sorted("vs ")); diff != "" {
		t.Errorf("virtual servers (-want +got):\n%s", diff)
	}
}

// TestMatrix renders every service type x traffic policy x family x
// affinity x protocol and checks the rules that hold for all of them.
func TestMatrix(t *testing.T) {
	types := []client.ServiceType{client.ClusterIP, client.NodePort, client.LoadBalancer}
	families := map[string][]string{"v4": {"10.96.1.1"}, "v6": {"fd00:96::1"}, "dual": {"10.96.1.1", "fd00:96::1"}}
	protos := []client.Protocol{client.TCP, client.UDP, client.SCTP}
	for _, typ := range types {
		for fname, cips := range families {
			for _, etp := range []bool{false, true} {
				for _, itp := range []bool{false, true} {
					for _, aff := range []bool{false, true} {
						for _, proto := range protos {
							name := fmt.Sprintf("%s/%s/etp=%v/itp=%v/affinity=%v/%s", typ, fname, etp, itp, aff, proto)
							t.Run(name, func(t *testing.T) {
								checkMatrix(t, typ, cips, etp, itp, aff, proto)
							})
						}
					}
				}
			}
		}
	}
}

func checkMatrix(t *testing.T, typ client.ServiceType, cips []string, etp, itp, aff bool, proto client.Protocol) {
	portName := map[client.Protocol]string{client.TCP: "http", client.UDP: "dns", client.SCTP: "sctp"}[proto]
	svc := &client.Service{Namespace: "m", Name: "s", Type: typ, ClusterIPs: ips(cips...),
		ExternalIPs:          ips("203.0.113.1", "2001:db8::1"),
		ExternalTrafficLocal: etp, InternalTrafficLocal: itp, HealthCheckNodePort: 31000,
		Ports: []client.Port{{Name: portName, Protocol: proto, Port: 80, NodePort: 30080}}}
	if typ == client.LoadBalancer {
		svc.LoadBalancerIPs = ips("198.51.100.1")
	}
	if aff {
		svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 60}
	}
	// As the client computes them: a local and a remote endpoint, the
	// remote one dropped from the scope a Local policy covers.
	local := ep("local", true, true, true, "10.244.1.1", "fd00:244::1")
	remote := ep("remote", false, !itp, !etp, "10.244.2.1", "fd00:244::2")
	r := render(t, &client.ServiceEndpoints{Service: svc, Endpoints: []*client.Endpoint{local, remote}}, nodeCfg)
	// Every virtual server, and nothing else, is recorded as the sink's.
	var recorded []string
	for _, l := range r.sorted("vs ") {
		recorded = append(recorded, strings.Fields(l)[1])
	}
	var records []string
	for k := range r.records {
		records = append(records, k)
	}
	sort.Strings(records)
	if d := cmp.Diff(recorded, records); d != "" {
		t.Errorf("records of virtual servers -servers +records:\n%s", d)
	}

	clusterIPs := map[string]bool{}
	for _, c := range cips {
		clusterIPs[c] = true
	}
	servers := map[string]bool{}
	for _, l := range r.sorted("vs ") {
		servers[strings.Fields(l)[1]] = true
		if strings.Contains(l, "persistent 60") != aff {
			t.Errorf("affinity %v but %q", aff, l)
		}
	}
	for c := range clusterIPs {
		vs := string(proto) + "/" + netip.AddrPortFrom(ip(c), 80).String()
		if !servers[vs] {
			t.Errorf("missing cluster IP virtual server %s", vs)
		}
	}
	for _, d := range r.sorted("dest ") {
		f := strings.Fields(d)
		dst, vs := netip.MustParseAddrPort(f[1]), f[3]
		addr := netip.MustParseAddrPort(vs[strings.Index(vs, "/")+1:]).Addr()
		if dst.Addr().Is4() != addr.Is4() {
			t.Errorf("destination of the wrong family: %s", d)
		}
		remoteDest := strings.HasPrefix(f[1], "10.244.2.") || strings.HasPrefix(f[1], "[fd00:244::2]")
		if clusterIPs[addr.String()] && itp && remoteDest {
			t.Errorf("iTP=Local but a remote destination on the cluster IP: %s", d)
		}
		if !clusterIPs[addr.String()] && etp && remoteDest {
			t.Errorf("eTP=Local but a remote destination on an external address: %s", d)
		}
	}
	sets := strings.Join(r.sorted("set "), "\n")
	if strings.Contains(sets, "-LOCAL") != etp {
		t.Errorf("eTP=Local is %v but -LOCAL sets are:\n%s", etp, sets)
	}
	hasNodePort := typ != client.ClusterIP
	if servers[string(proto)+"/192.168.1.10:30080"] != (hasNodePort && clusterIPs["10.96.1.1"]) {
		t.Errorf("IPv4 node port virtual server presence wrong for %s", typ)
	}
	if servers[string(proto)+"/127.0.0.1:30080"] {
		t.Error("node port served on loopback")
	}
	if strings.Contains(sets, "HEALTH-CHECK") != etp {
		t.Errorf("health check node port set presence != eTP=Local:\n%s", sets)
	}
	if !strings.Contains(sets, "LOOP-BACK 10.244.1.1") && clusterIPs["10.96.1.1"] {
		t.Errorf("no hairpin entry for the local endpoint:\n%s", sets)
	}
	if strings.Contains(sets, "LOOP-BACK 10.244.2.1") {
		t.Errorf("hairpin entry for a remote endpoint:\n%s", sets)
	}
}

// TestSourceRangesPerFamily: kube-proxy's firewall of a load-balancer IP
// is per family. A family without a range, or with a zero-length one
// (allow all), has no firewall entry and no source entry: a zero-length
// range in a hash:ip,port,net set is refused by the kernel, and the
// address would then be in the firewall set with no allowed source.
func TestSourceRangesPerFamily(t *testing.T) {
	fw := func(r *recorder) []string {
		var out []string
		for _, l := range r.sorted("set ") {
			if strings.Contains(l, "LOAD-BALANCER-FW") || strings.Contains(l, "LOAD-BALANCER-SOURCE") {
				out = append(out, l)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		ranges []string
		want   []string
	}{
		{"0.0.0.0/0 allows all IPv4 clients", []string{"0.0.0.0/0"}, nil},
		{"::/0 allows all IPv6 clients; IPv4 filtered", []string{"::/0", "10.0.0.0/8"}, []string{
			"set KUBE-LOAD-BALANCER-FW 198.51.100.4,tcp:80",
			"set KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.4,tcp:80,10.0.0.0/8",
		}},
		{"IPv4 ranges only: the IPv6 side is open", []string{"10.0.0.0/8"}, []string{
			"set KUBE-LOAD-BALANCER-FW 198.51.100.4,tcp:80",
			"set KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.4,tcp:80,10.0.0.0/8",
		}},
		{"a zero-length range beside others opens its family only", []string{"10.0.0.0/8", "0.0.0.0/0", "2001:db8::/32"}, []string{
			"set KUBE-6-LOAD-BALANCER-FW 2001:db8:2::1,tcp:80",
			"set KUBE-6-LOAD-BALANCER-SOURCE-CID 2001:db8:2::1,tcp:80,2001:db8::/32",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &client.Service{Namespace: "shop", Name: "lb", Type: client.LoadBalancer,
				ClusterIPs:      ips("10.96.0.30", "fd00:10:96::30"),
				LoadBalancerIPs: ips("198.51.100.4", "2001:db8:2::1"),
				Ports:           []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, NodePort: 30080}}}
			for _, p := range tt.ranges {
				svc.LoadBalancerSourceRanges = append(svc.LoadBalancerSourceRanges, netip.MustParsePrefix(p))
			}
			r := render(t, &client.ServiceEndpoints{Service: svc}, nodeCfg)
			if diff := cmp.Diff(tt.want, fw(r)); diff != "" {
				t.Errorf("firewall entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOtherFamilyAddressesNotServed: an IPv6 external or load-balancer IP
// of an IPv4-only service gets no virtual server, binding or set entry
// (kube-proxy's IPv6 proxier does not serve the service).
func TestOtherFamilyAddressesNotServed(t *testing.T) {
	se := &client.ServiceEndpoints{
		Service: &client.Service{Namespace: "shop", Name: "lb", Type: client.LoadBalancer,
			ClusterIPs:      ips("10.96.0.30"),
			ExternalIPs:     ips("203.0.113.7", "2001:db8::7"),
			LoadBalancerIPs: ips("198.51.100.4", "2001:db8:2::1"),
			Ports:           []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}}},
		Endpoints: []*client.Endpoint{ep("a", false, true, true, "10.244.2.5")},
	}
	r := render(t, se, nodeCfg)
	var v6 []string
	for l := range r.lines {
		if strings.Contains(l, "2001:db8") {
			v6 = append(v6, l)
		}
	}
	if len(v6) != 0 {
		t.Errorf("IPv6 addresses of an IPv4-only service served: %q", v6)
	}
	if diff := cmp.Diff([]string{"bind 10.96.0.30", "bind 198.51.100.4", "bind 203.0.113.7"}, r.sorted("bind ")); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}
