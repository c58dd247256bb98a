package ipvssink

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate/seed"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// TestSeedServesRuntimeHandler: the full-state controller's seed entry
// point ServeProxyMode (fullstate/seed) serves the runtime's own handler
// (/proxyMode and /metrics), not a second implementation.
func TestSeedServesRuntimeHandler(t *testing.T) {
	h := httpserve.Handler(httpserve.NewMetrics(), healthcheck.NewProxyHealth(time.Minute, nil), "ipvs")
	ctl := seed.NewController(render.Config{}, dataplane.NewApplier(dataplane.DryRun{Out: io.Discard}), nil, nil)
	ctl.Handler = h
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctl.ProxyModeAddress = ln.Addr().String()
	ln.Close()
	errCh := make(chan error, 1)
	go ctl.ServeProxyMode(errCh)
	get := func(path string) string {
		for i := 0; i < 100; i++ {
			select {
			case err := <-errCh:
				t.Fatalf("ServeProxyMode: %v", err)
			default:
			}
			resp, err := http.Get("http://" + ctl.ProxyModeAddress + path)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return string(b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("GET %s: no answer", path)
		return ""
	}
	if got := get("/proxyMode"); got != "ipvs" {
		t.Errorf("/proxyMode = %q, want ipvs", got)
	}
	if got := get("/metrics"); !strings.Contains(got, "kubeproxy_sync_proxy_rules_duration_seconds") {
		t.Errorf("/metrics lacks kube-proxy's sync duration:\n%.300s", got)
	}
}
