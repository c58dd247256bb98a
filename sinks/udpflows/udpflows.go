// Package udpflows is the sinks' conntrack reconciler, with kube-proxy
// v1.37's semantics (pkg/proxy/conntrack/cleanup.go): after a sync that
// programmed a snapshot in which some UDP service's endpoints changed, it
// deletes, per address family, every UDP conntrack entry whose original
// destination is a cluster, load-balancer or external IP and port of a UDP
// service and whose reply source is not one of the service's serving
// endpoints (a service without any included: the datagrams sent while it
// had none were answered by nothing), and the entries to a UDP node port,
// matched by port alone, when at least one endpoint serves it. It exports
// kube-proxy's kubeproxy_conntrack_reconciler_sync_duration_seconds and
// kubeproxy_conntrack_reconciler_deleted_entries_total. Every sink uses
// it through the runtime (sinks/runtime); the kernel side is
// host/conntrack.
package udpflows

import (
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
)

// Reconciler tracks the snapshots handed to a sink's controller and
// reconciles the node's UDP flows after the syncs that need it. It is
// safe for concurrent use.
type Reconciler struct {
	ct       conntrack.Reconciler
	log      *slog.Logger
	duration *prometheus.HistogramVec
	deleted  *prometheus.CounterVec

	mu sync.Mutex
	// last is the last snapshot handed over (nil before the first).
	last *client.Snapshot
	// pending is set when a snapshot handed over changed a UDP service's
	// endpoints and no successful sync has reconciled since.
	pending bool
}

// New returns a Reconciler deleting flows through ct and registering its
// metrics in reg (none when nil).
func New(ct conntrack.Reconciler, reg prometheus.Registerer, log *slog.Logger) (*Reconciler, error) {
	r := &Reconciler{
		ct: ct, log: log,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_conntrack_reconciler_sync_duration_seconds", Help: "ReconcileConntrackFlowsLatency latency in seconds",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"ip_family"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_conntrack_reconciler_deleted_entries_total", Help: "Cumulative conntrack flows deleted by conntrack reconciler"}, []string{"ip_family"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{r.duration, r.deleted} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// HandedOver records a snapshot handed to the controller: the next
// successful sync reconciles when it changed a UDP service's endpoints.
func (r *Reconciler) HandedOver(s *client.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pending {
		r.pending = udpEndpointsChanged(r.last, s)
	}
	r.last = s
}

// Synced is called after every sync: when it programmed the kernel (ok)
// and a snapshot since the last reconcile changed a UDP service's
// endpoints, it reconciles the flows with the last snapshot handed over.
// It reports the flows deleted.
func (r *Reconciler) Synced(ok bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || !r.pending {
		return 0
	}
	r.pending = false
	total := 0
	for _, ipv6 := range []bool{false, true} {
		start := time.Now()
		w := Want(r.last, ipv6)
		n, err := r.ct.ReconcileUDP(ipv6, w)
		fam := family(ipv6)
		r.duration.WithLabelValues(fam).Observe(time.Since(start).Seconds())
		r.deleted.WithLabelValues(fam).Add(float64(n))
		total += n
		if err != nil {
			r.log.Error("stale UDP conntrack entries not all deleted", "ip-family", fam, "deleted", n, "error", err)
		} else if n > 0 {
			r.log.Info("stale UDP conntrack entries deleted", "ip-family", fam, "deleted", n)
		}
	}
	return total
}

// family is kube-proxy's ip_family label value.
func family(ipv6 bool) string {
	if ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// hasUDP reports whether se has a UDP port.
func hasUDP(se *client.ServiceEndpoints) bool {
	return se != nil && se.Service != nil && slices.ContainsFunc(se.Service.Ports, func(p client.Port) bool { return p.Protocol == client.UDP })
}

// endpointsOf returns se's endpoints (none for nil).
func endpointsOf(se *client.ServiceEndpoints) []*client.Endpoint {
	if se == nil {
		return nil
	}
	return se.Endpoints
}

// udpChange reports whether a service that has a UDP port, before or
// after, changed its endpoints: what makes kube-proxy reconcile
// (UpdateEndpointsMapResult.ConntrackCleanupRequired).
func udpChange(old, new *client.ServiceEndpoints) bool {
	return (hasUDP(old) || hasUDP(new)) && !slices.EqualFunc(endpointsOf(old), endpointsOf(new), (*client.Endpoint).Equal)
}

// udpEndpointsChanged reports whether s changed a UDP service's endpoints
// since prev (nil: s is the first snapshot, every service is new).
func udpEndpointsChanged(prev, s *client.Snapshot) bool {
	lookup := func(k client.ServiceKey) *client.ServiceEndpoints {
		if prev == nil {
			return nil
		}
		return prev.Lookup(k)
	}
	if !s.Full {
		for _, c := range s.Changes {
			if udpChange(lookup(c.Key), c.Service) {
				return true
			}
		}
		return false
	}
	for se := range s.All() {
		if udpChange(lookup(se.Service.Key()), se) {
			return true
		}
	}
	if prev != nil {
		for se := range prev.All() {
			if s.Lookup(se.Service.Key()) == nil && udpChange(se, nil) {
				return true
			}
		}
	}
	return false
}

// Want returns what one family's UDP flows are reconciled with under s:
// every frontend of every UDP service port (its cluster IP,
// load-balancer IPs and external IPs of the family, and the port) with
// the serving endpoints of the family at the port's backend port, and
// its node port when at least one endpoint serves.
func Want(s *client.Snapshot, ipv6 bool) *conntrack.Want {
	w := &conntrack.Want{Frontends: map[netip.AddrPort]conntrack.Endpoints{}, NodePorts: map[uint16]conntrack.Endpoints{}}
	if s == nil {
		return w
	}
	for se := range s.All() {
		svc := se.Service
		for _, p := range svc.Ports {
			if p.Protocol != client.UDP {
				continue
			}
			eps := conntrack.Endpoints{}
			for _, e := range se.Endpoints {
				port, ok := e.PortFor(p)
				if !e.Serving || !ok {
					continue
				}
				for _, a := range e.IPs.Family(ipv6) {
					eps[netip.AddrPortFrom(a, uint16(port))] = struct{}{}
				}
			}
			for _, ips := range []client.IPs{svc.ClusterIPs, svc.LoadBalancerIPs, svc.ExternalIPs} {
				for _, a := range ips.Family(ipv6) {
					w.Frontends[netip.AddrPortFrom(a, uint16(p.Port))] = eps
				}
			}
			if p.NodePort != 0 && len(eps) > 0 {
				w.NodePorts[uint16(p.NodePort)] = eps
			}
		}
	}
	return w
}
