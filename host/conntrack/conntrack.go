// Package conntrack removes the stale UDP conntrack entries of removed
// service endpoints, as kube-proxy does with `conntrack -D`: when a UDP
// destination goes, a client that keeps sending to the service from the
// same address and port would otherwise stay pinned by its conntrack entry
// to the endpoint that no longer exists (UDP has no connection to end).
//
// An entry is stale for a Target when its original destination is the
// virtual server's address and port and its reply source is the backend's:
// the flows IPVS (with net.ipv4.vs.conntrack=1) or a DNAT rule sent from
// the service to that endpoint. It speaks ctnetlink through
// github.com/ti-mo/conntrack, in a chosen network namespace.
package conntrack

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// Target names the flows of one removed UDP destination.
type Target struct {
	// Service is the virtual server's address and port: the flows'
	// original destination.
	Service netip.AddrPort
	// Backend is the endpoint's address and port: the flows' reply source.
	// The zero value selects every flow to Service, whatever answers it:
	// what kube-proxy flushes when a UDP service gets its first endpoint
	// (datagrams sent while it had none left flows that lead nowhere).
	Backend netip.AddrPort
}

// String formats the target as "service -> backend", or "service -> any".
func (t Target) String() string {
	if t.anyBackend() {
		return t.Service.String() + " -> any"
	}
	return t.Service.String() + " -> " + t.Backend.String()
}

func (t Target) anyBackend() bool { return t.Backend == netip.AddrPort{} }

func (t Target) valid() bool {
	if !t.Service.Addr().IsValid() || t.Service.Port() == 0 {
		return false
	}
	return t.anyBackend() || t.Backend.Addr().IsValid() && t.Backend.Port() != 0
}

// normalize unmaps IPv4-mapped IPv6 addresses, as conntrack reports IPv4
// flows with 4-byte addresses.
func (t Target) normalize() Target {
	n := Target{Service: netip.AddrPortFrom(t.Service.Addr().Unmap(), t.Service.Port())}
	if !t.anyBackend() {
		n.Backend = netip.AddrPortFrom(t.Backend.Addr().Unmap(), t.Backend.Port())
	}
	return n
}

// Flusher removes stale UDP flows. *Conn implements it; a controller takes
// the interface so that its tests can use a fake.
type Flusher interface {
	FlushUDP(targets []Target) (deleted int, err error)
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

var _ Flusher = (*Conn)(nil)

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

// udpKey returns the target a flow belongs to, if it is a UDP flow.
func udpKey(f ct.Flow) (Target, bool) {
	if f.TupleOrig.Proto.Protocol != unix.IPPROTO_UDP {
		return Target{}, false
	}
	return Target{
		Service: netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress.Unmap(), f.TupleOrig.Proto.DestinationPort),
		Backend: netip.AddrPortFrom(f.TupleReply.IP.SourceAddress.Unmap(), f.TupleReply.Proto.SourcePort),
	}, true
}

// matcher selects the flows of a set of targets.
type matcher struct {
	exact   map[Target]struct{}
	service map[netip.AddrPort]struct{} // targets with any backend
}

func newMatcher(targets []Target) (matcher, error) {
	m := matcher{exact: map[Target]struct{}{}, service: map[netip.AddrPort]struct{}{}}
	for _, t := range targets {
		if !t.valid() {
			return matcher{}, fmt.Errorf("conntrack: flush UDP flows of %s: invalid target (the service needs an address and a port; the backend too, unless zero for any)", t)
		}
		t = t.normalize()
		if t.anyBackend() {
			m.service[t.Service] = struct{}{}
		} else {
			m.exact[t] = struct{}{}
		}
	}
	return m, nil
}

func (m matcher) match(f ct.Flow) bool {
	k, ok := udpKey(f)
	if !ok {
		return false
	}
	if _, ok := m.service[k.Service]; ok {
		return true
	}
	_, ok = m.exact[k]
	return ok
}

// FlushUDP deletes the UDP flows of the targets and returns how many it
// deleted. It reads the conntrack table once and deletes each matching
// flow (ctnetlink cannot filter deletions by tuple); a flow that expires
// in between is not an error. Failures to delete are reported together,
// each naming its flow; the other flows are still deleted.
func (c *Conn) FlushUDP(targets []Target) (int, error) {
	if len(targets) == 0 {
		return 0, nil
	}
	m, err := newMatcher(targets)
	if err != nil {
		return 0, err
	}
	flows, err := c.c.Dump(nil)
	if err != nil {
		return 0, fmt.Errorf("conntrack: dump flows to flush %d UDP targets: %w", len(targets), err)
	}
	deleted := 0
	var errs []error
	for _, f := range flows {
		if !m.match(f) {
			continue
		}
		// The library picks the message's family from both tuples; the
		// kernel looks the flow up by the original one.
		err := c.c.Delete(ct.Flow{TupleOrig: f.TupleOrig, TupleReply: f.TupleReply, Zone: f.Zone})
		switch {
		case errors.Is(err, unix.ENOENT):
			// Expired or deleted since the dump.
		case err != nil:
			k, _ := udpKey(f)
			errs = append(errs, fmt.Errorf("conntrack: delete UDP flow %s of %s: %w", f.TupleOrig, k, err))
		default:
			deleted++
		}
	}
	return deleted, errors.Join(errs...)
}
