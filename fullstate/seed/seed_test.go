package seed

import (
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// TestCallback: the seed's Callback writes a snapshot received on a
// channel as fullstate.Controller.Sync does, and drains the channel when
// the kernel cannot be read.
func TestCallback(t *testing.T) {
	n := dataplanetest.NewNode(t, nil)
	k := n.Kernel(t)
	node := netip.MustParseAddr("192.168.1.10")
	c := NewController(render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{node}}, dataplane.NewApplier(k), n.Reader(k, node), nil)
	var last dataplane.SyncStats
	c.OnSync = func(st dataplane.SyncStats) { last = st }
	se := &client.ServiceEndpoints{Service: &client.Service{Namespace: "ns", Name: "a", Type: client.ClusterIP,
		Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}}}}
	se.Service.ClusterIPs.Add(netip.MustParseAddr("10.96.0.1"))
	send := func(ses ...*client.ServiceEndpoints) {
		ch := make(chan *client.ServiceEndpoints, len(ses))
		for _, se := range ses {
			ch <- se
		}
		close(ch)
		c.Callback(ch)
	}
	send(se)
	// A server, its binding, its KUBE-CLUSTER-IP, KUBE-IPVS-IPS and
	// KUBE-PROXYSINKS-VS entries.
	if last.Err != nil || last.Services != 1 || last.Writes != 5 {
		t.Fatalf("first snapshot: %+v, want 1 service and 5 writes", last)
	}
	if !n.Links.Has(netip.MustParseAddr("10.96.0.1")) {
		t.Error("the cluster IP is not bound")
	}
	// A controller whose kernel read fails consumes the whole snapshot
	// and writes nothing.
	bad := NewController(render.Config{Scheduler: "rr"}, dataplane.NewApplier(k), failingReader{}, nil)
	ch := make(chan *client.ServiceEndpoints, 2)
	ch <- se
	ch <- se
	close(ch)
	bad.Callback(ch)
	if len(ch) != 0 {
		t.Errorf("%d services left in the channel", len(ch))
	}
}

type failingReader struct{}

func (failingReader) Read() (*dataplane.State, error) { return nil, errors.New("no kernel") }

// TestManagerNames: the seed's Manager names record what fullstate's do.
func TestManagerNames(t *testing.T) {
	c := NewController(render.Config{}, dataplane.NewApplier(dataplanetest.NewNode(t, nil).Kernel(t)), nil, nil)
	m := c.Manager()
	vs := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.2"), Port: 80}
	m.Reset()
	m.ApplyServer(vs, render.ServerOptions{Scheduler: "rr"})
	m.AddDestination(render.Destination{Server: vs, Addr: netip.MustParseAddr("10.244.0.2"), Port: 8080}, render.DestOptions{Weight: 1})
	m.BindServerToInterface(vs)
	m.Done()
	if res := m.Apply(); res.Err() != nil || res.Writes != 3 {
		t.Fatalf("Apply: %d writes (%v), want server, destination and binding", res.Writes, res.Err())
	}
	if s, d, b, e := m.Len(); s != 1 || d != 1 || b != 1 || e != 0 {
		t.Errorf("recorded %d servers, %d destinations, %d bindings, %d entries", s, d, b, e)
	}
	if ClusterIPService.String() != string(client.ClusterIP) || LoadBalancerService != ServiceType(client.LoadBalancer) {
		t.Errorf("service types %q %q", ClusterIPService, LoadBalancerService)
	}
}

func TestSeedRules(t *testing.T) {
	nat := GetNatRules(true, xtables.IPv4)
	var jumps, masq int
	for _, r := range nat {
		if r.Table != "nat" {
			t.Errorf("nat rules hold a %s rule", r.Table)
		}
		if strings.Contains(r.String(), "-j KUBE-SERVICES") {
			jumps++
		}
		if strings.HasSuffix(r.String(), "--random-fully") {
			masq++
		}
	}
	if jumps != 2 || masq != 1 {
		t.Errorf("nat: %d jumps to KUBE-SERVICES (want PREROUTING and OUTPUT), %d random-fully rules", jumps, masq)
	}
	for _, r := range GetFilterRules(false, xtables.IPv6) {
		if r.Table != "filter" || strings.Contains(r.String(), "KUBE-CLUSTER-IP ") {
			t.Errorf("IPv6 filter rule %q", r)
		}
	}
}

func TestBindFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f Flags
	BindFlags(fs, &f)
	if err := fs.Parse([]string{"--dry-run", "--node-address", "10.0.0.1,fd00::1", "--scheduling-method", "mh", "--weight", "3"}); err != nil {
		t.Fatal(err)
	}
	if !f.DryRun || len(f.NodeAddresses) != 2 || f.SchedulingMethod != "mh" || f.Weight != 3 {
		t.Errorf("flags: %+v", f)
	}
	if err := fs.Parse([]string{"--node-address", "nope"}); err == nil {
		t.Error("a bad node address was accepted")
	}
}

// TestServeProxyMode checks the seed's entry points serve the Handler they
// are given (the sink runtime's, tested with it in sinks/), report listen
// errors at once, and report a missing Handler instead of serving nothing.
func TestServeProxyMode(t *testing.T) {
	c := NewController(nodeCfgForSeed(), nil, nil, nil)
	c.ProxyModeAddress = "127.0.0.1:0"
	if err := c.SetUpHttpListen(); err == nil || !strings.Contains(err.Error(), "no Handler") {
		t.Errorf("no handler: %v", err)
	}
	errCh := make(chan error, 1)
	c.ServeProxyMode(errCh)
	if err := <-errCh; err == nil || !strings.Contains(err.Error(), "no Handler") {
		t.Errorf("ServeProxyMode without a handler: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "mode from the runtime") })
	c.Handler = mux
	if err := c.SetUpHttpListen(); err != nil {
		t.Fatal(err)
	}
	c.ProxyModeAddress = "256.0.0.1:1"
	if err := c.SetUpHttpListen(); err == nil || !strings.Contains(err.Error(), "256.0.0.1:1") {
		t.Errorf("bad address: %v", err)
	}
	go c.ServeProxyMode(errCh)
	if err := <-errCh; err == nil || !strings.Contains(err.Error(), "256.0.0.1:1") {
		t.Errorf("ServeProxyMode on a bad address: %v", err)
	}
	// Serve on a free port and fetch.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.ProxyModeAddress = ln.Addr().String()
	ln.Close()
	go c.ServeProxyMode(errCh)
	var body string
	for i := 0; i < 50; i++ {
		resp, err := http.Get("http://" + c.ProxyModeAddress + "/proxyMode")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if body != "mode from the runtime" {
		t.Errorf("/proxyMode = %q, want the handler's answer", body)
	}
}

func nodeCfgForSeed() render.Config { return render.Config{} }
