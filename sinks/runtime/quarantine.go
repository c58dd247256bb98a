package runtime

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
)

// Retrier is a Controller that retries its quarantined objects alone (the
// objects the kernel refused, SyncStats.Quarantined): the runtime calls
// Retry when the first of them is due, between snapshots.
type Retrier interface {
	Retry() SyncStats
}

// EventRecorder records an Event on a Service (the kube source's API;
// kubeEvents).
type EventRecorder interface {
	Refused(namespace, name, message string)
}

// eventInterval is the shortest time between two Events on one refused
// object (client-go's own correlator also limits them).
const eventInterval = 5 * time.Minute

// quarantineReport reports the quarantined objects of each sync: a log
// line when an object enters quarantine and when it leaves, the
// proxysinks_quarantined_objects gauge by kind, and, with an
// EventRecorder, a Warning Event on the object's Service, at most one per
// object every eventInterval. It also tells the loop when to retry.
type quarantineReport struct {
	log    *slog.Logger
	gauge  *prometheus.GaugeVec
	events EventRecorder
	now    func() time.Time

	mu sync.Mutex
	// last is the cluster's state, to find the Service of an object
	// named by its address.
	last    *client.Snapshot
	current map[string]quarantine.Entry // by kind and name
	kinds   map[string]bool             // the kinds ever reported
	evented map[string]time.Time
	next    time.Time
}

// newQuarantineReport registers the gauge in reg (nil: none).
func newQuarantineReport(log *slog.Logger, reg prometheus.Registerer) *quarantineReport {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "proxysinks_quarantined_objects",
		Help: "Objects the kernel refused alone, retried with backoff (the rest of the node is programmed), by kind."}, []string{"kind"})
	if reg != nil {
		reg.MustRegister(g)
	}
	return &quarantineReport{log: log, gauge: g, now: time.Now, current: map[string]quarantine.Entry{},
		kinds: map[string]bool{}, evented: map[string]time.Time{}}
}

// snapshot records the cluster's state handed to the controller.
func (q *quarantineReport) snapshot(s *client.Snapshot) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.last = s
}

// nextRetry returns when the first quarantined object is due (zero: none).
func (q *quarantineReport) nextRetry() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.next
}

// report takes a sync's quarantine, the whole of it. A sync that failed
// as a whole says nothing of it: the last report stands.
func (q *quarantineReport) report(st SyncStats) {
	if st.Err != nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	seen := make(map[string]bool, len(st.Quarantined))
	count := map[string]int{}
	for _, e := range st.Quarantined {
		id := e.Kind + " " + e.Name
		seen[id] = true
		count[e.Kind]++
		q.kinds[e.Kind] = true
		if e.Service == "" {
			e.Namespace, e.Service = owner(q.last, e.Object)
		}
		if _, was := q.current[id]; !was {
			q.log.Warn("kernel refused an object: quarantined, retried alone with backoff; the rest of the node is programmed",
				"kind", e.Kind, "object", e.Name, "service", serviceName(e.Object), "retry_in", e.Next.Sub(now).Round(time.Millisecond), "error", e.Err)
		} else {
			q.log.Debug("quarantined object refused again", "kind", e.Kind, "object", e.Name, "attempts", e.Attempts, "error", e.Err)
		}
		q.current[id] = e
		if q.events != nil && e.Service != "" && now.Sub(q.evented[id]) >= eventInterval {
			q.evented[id] = now
			q.events.Refused(e.Namespace, e.Service, fmt.Sprintf("the node's kernel refused %s %s: %v; retried with backoff", e.Kind, e.Name, e.Err))
		}
	}
	for id, e := range q.current {
		if !seen[id] {
			delete(q.current, id)
			delete(q.evented, id)
			q.log.Info("object out of quarantine", "kind", e.Kind, "object", e.Name, "service", serviceName(e.Object), "attempts", e.Attempts)
		}
	}
	for k := range q.kinds {
		q.gauge.WithLabelValues(k).Set(float64(count[k]))
	}
	q.next = quarantine.Next(st.Quarantined)
}

// serviceName is "namespace/name" of o's Service, or empty.
func serviceName(o quarantine.Object) string {
	if o.Service == "" {
		return ""
	}
	return o.Namespace + "/" + o.Service
}

// owner finds the Service of an object named by its address and port in
// s: the first (in key order) with the address among its cluster,
// external or load-balancer IPs and a port of that number, or, for an
// object of a node port (any address, or none), the first with that node
// port or health-check node port.
func owner(s *client.Snapshot, o quarantine.Object) (namespace, name string) {
	if s == nil || (!o.Addr.IsValid() && o.Port == 0) {
		return "", ""
	}
	var nodePort client.ServiceKey
	for se := range s.All() {
		svc := se.Service
		if svc == nil {
			continue
		}
		for _, p := range svc.Ports {
			if o.Addr.IsValid() && p.Port == int(o.Port) && hasAddr(svc, o.Addr) {
				return svc.Namespace, svc.Name
			}
			if nodePort.Name == "" && o.Port != 0 && (p.NodePort == int(o.Port) || svc.HealthCheckNodePort == int(o.Port)) {
				nodePort = svc.Key()
			}
		}
		if o.Port == 0 && hasAddr(svc, o.Addr) {
			return svc.Namespace, svc.Name
		}
	}
	return nodePort.Namespace, nodePort.Name
}

func hasAddr(svc *client.Service, a netip.Addr) bool {
	a = a.Unmap()
	for _, ips := range []client.IPs{svc.ClusterIPs, svc.ExternalIPs, svc.LoadBalancerIPs} {
		if slices.Contains(ips.All(), a) {
			return true
		}
	}
	return false
}

// retryTimer fires when the first quarantined object is due.
type retryTimer struct {
	t  *time.Timer
	at time.Time
	// firedFor is the time it last fired for: a time not after it is not
	// armed again (a retry whose sync failed as a whole reports no new
	// time; the next sync or resync retries).
	firedFor time.Time
}

func newRetryTimer() *retryTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &retryTimer{t: t}
}

// C delivers the retry times.
func (r *retryTimer) C() <-chan time.Time { return r.t.C }

// arm makes the timer fire at at (zero: never), unless it already fires
// then.
func (r *retryTimer) arm(at time.Time) {
	if at.Equal(r.at) || !at.IsZero() && !at.After(r.firedFor) {
		return
	}
	r.at = at
	r.t.Stop()
	if !at.IsZero() {
		r.t.Reset(max(time.Until(at), 0))
	}
}

// fired records that the timer fired.
func (r *retryTimer) fired() { r.firedFor, r.at = r.at, time.Time{} }

func (r *retryTimer) stop() { r.t.Stop() }
