package fullstate

import (
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/xtables"
)

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
