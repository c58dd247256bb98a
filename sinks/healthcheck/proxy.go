// Package healthcheck serves what load balancers, kubelet and monitoring
// probe on a node running a sink, with kube-proxy's semantics: /healthz and
// /livez on the health address (ProxyHealth), and one HTTP server per
// externalTrafficPolicy=Local service on its healthCheckNodePort
// (ServiceServer), answering 200 while the node has a ready local endpoint
// of the service and 503 otherwise.
package healthcheck

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to remove; /healthz fails on such a node so that load balancers
// drain it first.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// NodeState is what /healthz needs to know of the sink's own Node object.
type NodeState struct {
	// Known is false until the Node has been read (or when it does not
	// exist); /healthz is then unhealthy, as in kube-proxy.
	Known bool
	// Deleting is true when the Node has a deletion timestamp.
	Deleting bool
	// ToBeDeleted is true when the Node carries ToBeDeletedTaint.
	ToBeDeleted bool
}

// Eligible reports whether the node should receive load-balancer traffic.
func (n NodeState) Eligible() bool { return n.Known && !n.Deleting && !n.ToBeDeleted }

// ProxyHealth tracks whether the sink keeps the kernel programmed, as
// kube-proxy's proxy health server does: the sink is unhealthy when a change
// has been waiting longer than the timeout for a sync that programs it.
// Changes that are waiting are announced with Queued; a successful sync
// with Updated. Safe for concurrent use.
type ProxyHealth struct {
	timeout time.Duration
	now     func() time.Time
	// node, when set, returns the state of the sink's Node; nil means the
	// node is always eligible (a sink fed from a manifest file has no Node).
	node func() NodeState

	// source, when set, says whether the sink's source can give a state
	// it trusts; see SetSource.
	source func() (stale bool, reason string)

	mu          sync.Mutex
	lastUpdated time.Time
	queued      time.Time // oldest change not yet programmed; zero when none
}

// NewProxyHealth returns a ProxyHealth with the given timeout (kube-proxy
// uses twice its --sync-period). node may be nil: see ProxyHealth.
func NewProxyHealth(timeout time.Duration, node func() NodeState) *ProxyHealth {
	return &ProxyHealth{timeout: timeout, now: time.Now, node: node}
}

// SetSource makes /healthz name the reason while the source is stale
// ("sourceStale"). Staleness alone does not make the sink unhealthy: the
// kernel keeps serving the last good state, and before the first snapshot
// nothing is queued. Call it before serving.
func (h *ProxyHealth) SetSource(f func() (stale bool, reason string)) { h.source = f }

// Queued records that a change is waiting to be programmed. Only the
// oldest waiting change counts.
func (h *ProxyHealth) Queued() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queued.IsZero() {
		h.queued = h.now()
	}
}

// Updated records a successful sync: every queued change is programmed.
func (h *ProxyHealth) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queued = time.Time{}
	h.lastUpdated = h.now()
}

// Status is the JSON body of /healthz and /livez (kube-proxy's field names).
type Status struct {
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is set on /healthz only.
	NodeEligible *bool `json:"nodeEligible,omitempty"`
	Healthy      bool  `json:"healthy"`
	// SourceStale is, on /healthz, why the source cannot give a state it
	// trusts; empty when it can.
	SourceStale string `json:"sourceStale,omitempty"`
}

// Live reports whether the sink is live: no change has waited longer than
// the timeout. A sink that never synced but has nothing queued is live, as
// in kube-proxy (it is still starting).
func (h *ProxyHealth) Live() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	st := Status{LastUpdated: h.lastUpdated, CurrentTime: now, Healthy: true}
	if !h.queued.IsZero() && now.Sub(h.queued) >= h.timeout {
		st.Healthy = false
	}
	return st
}

// Healthy is Live, and also false when the node is not eligible for
// load-balancer traffic (being deleted, or tainted by the autoscaler).
func (h *ProxyHealth) Healthy() Status {
	st := h.Live()
	eligible := true
	if h.node != nil {
		eligible = h.node().Eligible()
	}
	st.NodeEligible = &eligible
	st.Healthy = st.Healthy && eligible
	if h.source != nil {
		if stale, reason := h.source(); stale {
			st.SourceStale = reason
		}
	}
	if st.Healthy {
		// kube-proxy reports the time of the answer as the last update
		// when healthy.
		st.LastUpdated = st.CurrentTime
	}
	return st
}

// HealthzHandler serves /healthz: 200 when Healthy, else 503, with the
// Status as JSON.
func (h *ProxyHealth) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeStatus(w, h.Healthy()) })
}

// LivezHandler serves /livez: 200 when Live, else 503, with the Status as
// JSON.
func (h *ProxyHealth) LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := h.Live()
		if st.Healthy {
			st.LastUpdated = st.CurrentTime
		}
		writeStatus(w, st)
	})
}

func writeStatus(w http.ResponseWriter, st Status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if st.Healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	writeJSON(w, st)
}

// writeJSON writes v, a value that always marshals, as the body.
func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
}
