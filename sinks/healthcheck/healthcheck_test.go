package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func ep(key string, local, ready bool, ips ...string) *client.Endpoint {
	e := &client.Endpoint{Key: client.EndpointKey(key), Local: local, Ready: ready, Serving: ready, Terminating: !ready}
	for _, s := range ips {
		e.IPs.Add(netip.MustParseAddr(s))
	}
	return e
}

func svc(name string, hcPort int, eps ...*client.Endpoint) *client.ServiceEndpoints {
	return &client.ServiceEndpoints{
		Service: &client.Service{Namespace: "default", Name: name, Type: client.LoadBalancer,
			ExternalTrafficLocal: hcPort > 0, HealthCheckNodePort: hcPort},
		Endpoints: eps,
	}
}

func TestLocalReadyEndpoints(t *testing.T) {
	se := svc("web", 32000,
		ep("a", true, true, "10.0.0.1", "fd00::1"),
		ep("b", true, true, "10.0.0.1"), // the same address twice counts once
		ep("c", true, false, "10.0.0.3", "fd00::3"),
		ep("d", false, true, "10.0.0.4", "fd00::4"),
		ep("e", true, true, "10.0.0.5"),
	)
	got := [2]int{LocalReadyEndpoints(se, false), LocalReadyEndpoints(se, true)}
	if diff := cmp.Diff([2]int{2, 1}, got); diff != "" {
		t.Errorf("LocalReadyEndpoints (v4, v6) (-want +got):\n%s", diff)
	}
}

func TestHealthCheckPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *client.Service
		want int
	}{
		{"nil", nil, 0},
		{"cluster policy", &client.Service{HealthCheckNodePort: 32000}, 0},
		{"local", &client.Service{ExternalTrafficLocal: true, HealthCheckNodePort: 32000}, 32000},
		{"local without port", &client.Service{ExternalTrafficLocal: true}, 0},
		{"out of range", &client.Service{ExternalTrafficLocal: true, HealthCheckNodePort: 70000}, 0},
	} {
		if got := HealthCheckPort(tc.s); got != tc.want {
			t.Errorf("%s: HealthCheckPort = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestProxyHealth(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	node := NodeState{Known: true}
	h := NewProxyHealth(time.Minute, func() NodeState { return node })
	h.now = c.now
	type want struct{ healthz, livez int }
	check := func(step string, w want) {
		t.Helper()
		for path, code := range map[string]int{"/healthz": w.healthz, "/livez": w.livez} {
			handler := h.HealthzHandler()
			if path == "/livez" {
				handler = h.LivezHandler()
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != code {
				t.Errorf("%s: %s = %d, want %d (body %s)", step, path, rec.Code, code, rec.Body)
			}
			var st Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("%s: %s body %q: %v", step, path, rec.Body, err)
			}
			if st.Healthy != (code == http.StatusOK) {
				t.Errorf("%s: %s healthy=%v with status %d", step, path, st.Healthy, code)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("%s: %s Content-Type %q", step, path, got)
			}
		}
	}
	check("starting, nothing queued", want{200, 200})
	h.Queued()
	c.t = c.t.Add(59 * time.Second)
	check("a change waits less than the timeout", want{200, 200})
	c.t = c.t.Add(time.Second)
	check("a change waits the timeout", want{503, 503})
	h.Updated()
	check("synced", want{200, 200})
	h.Queued()
	c.t = c.t.Add(30 * time.Second)
	h.Queued() // a later change does not restart the clock
	c.t = c.t.Add(30 * time.Second)
	check("the oldest change counts", want{503, 503})
	h.Updated()
	node.ToBeDeleted = true
	check("tainted by the autoscaler", want{503, 200})
	node = NodeState{Known: true, Deleting: true}
	check("node being deleted", want{503, 200})
	node = NodeState{}
	check("node not known", want{503, 200})
}

// inNS returns an HTTP client whose connections are made inside ns.
func inNS(ns *nstest.NetNS) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}

type answer struct {
	Code   int
	Weight string
	Body   serviceBody
}

func get(t *testing.T, hc *http.Client, url string) (answer, error) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	a := answer{Code: resp.StatusCode, Weight: resp.Header.Get("X-Load-Balancing-Endpoint-Weight")}
	if err := json.Unmarshal(b, &a.Body); err != nil {
		t.Fatalf("GET %s: body %q: %v", url, b, err)
	}
	return a, nil
}

func body(name string, n int, healthy bool) serviceBody {
	var b serviceBody
	b.Service.Namespace, b.Service.Name = "default", name
	b.LocalEndpoints, b.ServiceProxyHealthy = n, healthy
	return b
}

func refused(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	if _, err := get(t, hc, url); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET %s: %v, want connection refused", url, err)
	}
}

// TestServiceServerKernel serves health checks in a fresh network
// namespace and probes them with real HTTP requests.
func TestServiceServerKernel(t *testing.T) {
	ns := nstest.New(t)
	hc := inNS(ns)
	health := NewProxyHealth(time.Minute, nil)
	s := NewServiceServer(ServiceConfig{IPv4: true, IPv6: true, Health: health})
	t.Cleanup(s.Close)
	sync := func(snap *client.Snapshot) error {
		var err error
		if nerr := ns.Do(func() error { err = s.Sync(snap); return nil }); nerr != nil {
			t.Fatal(nerr)
		}
		return err
	}
	web := svc("web", 32001, ep("a", true, true, "10.0.0.1", "fd00::1"), ep("b", true, true, "10.0.0.2"))
	plain := svc("plain", 0, ep("a", true, true, "10.0.0.9"))
	if err := sync(&client.Snapshot{Full: true, Changes: nil}); err != nil {
		t.Fatal(err)
	}
	if err := sync(client.NewSnapshot([]*client.ServiceEndpoints{plain, web}, []client.Change{
		{Key: plain.Service.Key(), Service: plain}, {Key: web.Service.Key(), Service: web}})); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if diff := cmp.Diff(map[client.ServiceKey]int{web.Service.Key(): 32001}, s.Ports()); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		url  string
		want answer
	}{
		{"http://127.0.0.1:32001/", answer{200, "2", body("web", 2, true)}},
		{"http://[::1]:32001/", answer{200, "1", body("web", 1, true)}},
	} {
		got, err := get(t, hc, tc.url)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tc.url, diff)
		}
	}

	// The local endpoints start terminating: load balancers must drain the node.
	web2 := svc("web", 32001, ep("a", true, false, "10.0.0.1", "fd00::1"), ep("b", false, true, "10.0.0.2"))
	if err := sync(client.NewSnapshot([]*client.ServiceEndpoints{plain, web2}, []client.Change{{Key: web2.Service.Key(), Service: web2}})); err != nil {
		t.Fatal(err)
	}
	if got, err := get(t, hc, "http://127.0.0.1:32001/healthz"); err != nil || got.Code != 503 || got.Body != body("web", 0, true) {
		t.Errorf("no ready local endpoint: %+v, %v; want 503 with 0 endpoints", got, err)
	}

	// A sink that is not live fails every health check.
	health.now = func() time.Time { return time.Now().Add(-2 * time.Minute) }
	health.Queued()
	health.now = time.Now
	if err := sync(client.NewSnapshot([]*client.ServiceEndpoints{plain, web}, []client.Change{{Key: web.Service.Key(), Service: web}})); err != nil {
		t.Fatal(err)
	}
	if got, err := get(t, hc, "http://127.0.0.1:32001/"); err != nil || got.Code != 503 || got.Body != body("web", 2, false) {
		t.Errorf("sink not live: %+v, %v; want 503, serviceProxyHealthy false", got, err)
	}
	health.Updated()

	// The port moves: the old one closes, the new one opens. Another
	// process holds the new port: the error names the service, and the
	// next Sync retries it.
	var busy net.Listener
	if err := ns.Do(func() (err error) { busy, err = net.Listen("tcp4", "0.0.0.0:32002"); return err }); err != nil {
		t.Fatal(err)
	}
	moved := svc("web", 32002, ep("a", true, true, "10.0.0.1"))
	snap := client.NewSnapshot([]*client.ServiceEndpoints{plain, moved}, []client.Change{{Key: moved.Service.Key(), Service: moved}})
	err := sync(snap)
	if err == nil || !strings.Contains(err.Error(), "default/web") || !strings.Contains(err.Error(), "32002") || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Sync with the port taken: %v, want an address-in-use error naming default/web and 32002", err)
	}
	refused(t, hc, "http://127.0.0.1:32001/")
	refused(t, hc, "http://[::1]:32002/") // nothing half-open
	busy.Close()
	if err := sync(client.NewSnapshot([]*client.ServiceEndpoints{plain, moved}, nil)); err != nil {
		t.Fatalf("Sync after the port was freed: %v", err)
	}
	if got, err := get(t, hc, "http://127.0.0.1:32002/"); err != nil || got.Code != 200 {
		t.Errorf("retried port: %+v, %v; want 200", got, err)
	}

	// The service goes (and a Full snapshot drops what it does not list).
	if err := sync(&client.Snapshot{Full: true}); err != nil {
		t.Fatal(err)
	}
	refused(t, hc, "http://127.0.0.1:32002/")
	if len(s.Ports()) != 0 {
		t.Errorf("ports after removal: %v", s.Ports())
	}
}

// TestServiceServerAddresses listens only on the given node addresses.
func TestServiceServerAddresses(t *testing.T) {
	ns := nstest.New(t)
	hc := inNS(ns)
	s := NewServiceServer(ServiceConfig{IPv4: true, IPv6: true, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
	t.Cleanup(s.Close)
	web := svc("web", 32003, ep("a", true, true, "10.0.0.1", "fd00::1"))
	var err error
	if nerr := ns.Do(func() error { err = s.Set(web); return nil }); nerr != nil || err != nil {
		t.Fatalf("Set: %v %v", nerr, err)
	}
	if got, err := get(t, hc, "http://127.0.0.1:32003/"); err != nil || got.Code != 200 {
		t.Errorf("on the node address: %+v, %v; want 200", got, err)
	}
	refused(t, hc, "http://[::1]:32003/")
	s.Delete(web.Service.Key())
	refused(t, hc, "http://127.0.0.1:32003/")
}
