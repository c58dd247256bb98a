// Package conntrack deletes the stale UDP conntrack entries of services,
// as kube-proxy v1.37's conntrack reconciler does (pkg/proxy/conntrack):
// UDP has no connection to end, so a client that keeps sending to a
// service from the same address and port stays pinned by its conntrack
// entry to whatever answered first — an endpoint that is gone, or, for a
// service that had no endpoint, nothing.
//
// What the flows should look like is a Want: for each frontend (a cluster,
// load-balancer or external IP and port of a UDP service) and each node
// port, the serving endpoints that may answer. A UDP flow whose original
// destination is a frontend, or whose original destination port is a node
// port, and whose reply source is none of its serving endpoints is stale.
// It speaks ctnetlink through github.com/ti-mo/conntrack, in a chosen
// network namespace.
package conntrack

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"
)

// Endpoints is a set of serving endpoints (address and port). A nil or
// empty set means the frontend has none: every flow to it is stale.
type Endpoints map[netip.AddrPort]struct{}

// Want is the state one address family's UDP flows are reconciled with.
type Want struct {
	// Frontends maps each cluster, load-balancer and external IP and port
	// of a UDP service port to its serving endpoints (empty when it has
	// none: every flow to it is stale).
	Frontends map[netip.AddrPort]Endpoints
	// NodePorts maps each UDP node port to its serving endpoints; a node
	// port without one is left out (flows are matched on the port alone,
	// and an empty set would delete every UDP flow to that port number,
	// the node's or not).
	NodePorts map[uint16]Endpoints
}

// Stale reports whether f is a UDP flow w does not allow: its original
// destination is a frontend (or its destination port a node port) and its
// reply source is not one of that frontend's serving endpoints.
func (w *Want) Stale(f ct.Flow) bool {
	if f.TupleOrig.Proto.Protocol != unix.IPPROTO_UDP {
		return false
	}
	dst := netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress.Unmap(), f.TupleOrig.Proto.DestinationPort)
	reply := netip.AddrPortFrom(f.TupleReply.IP.SourceAddress.Unmap(), f.TupleReply.Proto.SourcePort)
	if eps, ok := w.Frontends[dst]; ok {
		_, serving := eps[reply]
		return !serving
	}
	if eps, ok := w.NodePorts[dst.Port()]; ok {
		_, serving := eps[reply]
		return !serving
	}
	return false
}

// Empty reports whether w names no frontend and no node port: nothing can
// be stale.
func (w *Want) Empty() bool { return len(w.Frontends) == 0 && len(w.NodePorts) == 0 }

// Reconciler deletes a family's stale UDP flows. *Conn implements it; the
// sinks' reconciler takes the interface so that its tests can use a fake.
type Reconciler interface {
	// ReconcileUDP deletes the UDP flows of the family (IPv6 when ipv6)
	// that w makes stale and returns how many it deleted.
	ReconcileUDP(ipv6 bool, w *Want) (deleted int, err error)
}

// Config configures Dial.
type Config struct {
	// NetNS is a file descriptor of the network namespace to work in; 0
	// means the caller's.
	NetNS int
}

// Conn is a ctnetlink connection in one network namespace. It is not safe
// for concurrent use.
type Conn struct {
	c *ct.Conn
}

var _ Reconciler = (*Conn)(nil)

// Dial opens a ctnetlink socket in the configured namespace.
func Dial(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c, err := ct.Dial(&netlink.Config{NetNS: cfg.NetNS})
	if err != nil {
		return nil, fmt.Errorf("conntrack: dial ctnetlink: %w", err)
	}
	return &Conn{c: c}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// family names an address family in messages and metrics, as kube-proxy
// does (v1.IPFamily).
func family(ipv6 bool) string {
	if ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// ReconcileUDP reads the family's conntrack table once and deletes each
// flow w makes stale (ctnetlink cannot filter deletions by tuple). A flow
// that expires in between is not an error. Failures to delete are
// reported together, each naming its flow; the other flows are still
// deleted.
func (c *Conn) ReconcileUDP(ipv6 bool, w *Want) (int, error) {
	if w.Empty() {
		return 0, nil
	}
	l3 := netfilter.ProtoIPv4
	if ipv6 {
		l3 = netfilter.ProtoIPv6
	}
	flows, err := c.c.DumpFilter(ct.NewFilter().Family(l3), nil)
	if err != nil {
		return 0, fmt.Errorf("conntrack: dump %s flows to reconcile: %w", family(ipv6), err)
	}
	deleted := 0
	var errs []error
	for _, f := range flows {
		if !w.Stale(f) {
			continue
		}
		// The library picks the message's family from both tuples; the
		// kernel looks the flow up by the original one.
		err := c.c.Delete(ct.Flow{TupleOrig: f.TupleOrig, TupleReply: f.TupleReply, Zone: f.Zone})
		switch {
		case errors.Is(err, unix.ENOENT):
			// Expired or deleted since the dump.
		case err != nil:
			errs = append(errs, fmt.Errorf("conntrack: delete stale UDP flow %s (answered by %s): %w", f.TupleOrig,
				netip.AddrPortFrom(f.TupleReply.IP.SourceAddress, f.TupleReply.Proto.SourcePort), err))
		default:
			deleted++
		}
	}
	return deleted, errors.Join(errs...)
}
