package diff_test

import (
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
)

// logSink prints the events it receives.
type logSink struct{}

func (logSink) SetService(s *client.Service)      { fmt.Println("SetService", s.Key()) }
func (logSink) DeleteService(k client.ServiceKey) { fmt.Println("DeleteService", k) }
func (logSink) SetEndpoint(k client.ServiceKey, e *client.Endpoint) {
	fmt.Println("SetEndpoint", k, e.Key, e.IPs.All(), "ready:", e.Ready)
}
func (logSink) DeleteEndpoint(k client.ServiceKey, key client.EndpointKey) {
	fmt.Println("DeleteEndpoint", k, key)
}
func (logSink) Sync() { fmt.Println("Sync") }

// An incremental sink fed from full snapshots: the adapter sends only what
// changed, by content.
func ExampleEvents() {
	svc := &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP,
		Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}}}
	svc.ClusterIPs.Add(netip.MustParseAddr("10.96.0.10"))
	endpoint := func(pod, ip string, ready bool) *client.Endpoint {
		e := &client.Endpoint{Key: client.EndpointKey("Pod/default/" + pod), Ready: ready, Serving: ready, Internal: ready}
		e.IPs.Add(netip.MustParseAddr(ip))
		return e
	}
	tr := client.NewTracker()
	ev := diff.NewEvents(logSink{})

	tr.Set(svc.Key(), &client.ServiceEndpoints{Service: svc, Endpoints: []*client.Endpoint{
		endpoint("web-a", "10.244.1.5", true), endpoint("web-b", "10.244.2.7", true)}})
	ev.Apply(tr.Snapshot())

	// web-a stops being ready; web-b is rebuilt but unchanged.
	tr.Set(svc.Key(), &client.ServiceEndpoints{Service: svc, Endpoints: []*client.Endpoint{
		endpoint("web-a", "10.244.1.5", false), endpoint("web-b", "10.244.2.7", true)}})
	ev.Apply(tr.Snapshot())
	// Output:
	// SetService default/web
	// SetEndpoint default/web Pod/default/web-a [10.244.1.5] ready: true
	// SetEndpoint default/web Pod/default/web-b [10.244.2.7] ready: true
	// Sync
	// SetEndpoint default/web Pod/default/web-a [10.244.1.5] ready: false
	// Sync
}
