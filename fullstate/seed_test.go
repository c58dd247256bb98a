package fullstate

import (
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
)

func TestSeedRules(t *testing.T) {
	nat := GetNatRules(true, rules.IPv4)
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
	for _, r := range GetFilterRules(false, rules.IPv6) {
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

func TestServeProxyMode(t *testing.T) {
	c := NewController(nodeCfgForSeed(), nil, nil, nil)
	c.ProxyModeAddress = "127.0.0.1:0"
	if err := c.SetUpHttpListen(); err != nil {
		t.Fatal(err)
	}
	c.ProxyModeAddress = "256.0.0.1:1"
	if err := c.SetUpHttpListen(); err == nil || !strings.Contains(err.Error(), "256.0.0.1:1") {
		t.Errorf("bad address: %v", err)
	}
	// Serve on a known free port and fetch.
	c.ProxyModeAddress = "127.0.0.1:18249"
	errCh := make(chan error, 1)
	go c.ServeProxyMode(errCh)
	var body string
	for i := 0; i < 50; i++ {
		resp, err := http.Get("http://127.0.0.1:18249/proxyMode")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if body != "ipvs" {
		t.Errorf("/proxyMode = %q, want ipvs", body)
	}
}

func nodeCfgForSeed() render.Config { return render.Config{} }
