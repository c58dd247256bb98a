// Package render turns one service and its endpoints into the kernel objects
// kube-proxy's IPVS mode programs for it: virtual servers, their
// destinations, the addresses bound on kube-ipvs0 and the ipset entries the
// iptables rules match. It is pure: no kernel, no state. Both IPVS sinks
// render through it, so for the same cluster they program the same kernel
// state.
package render

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Protocol is an IP protocol number.
type Protocol uint8

// The protocols services use.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

// String returns "TCP", "UDP", "SCTP" or the number.
func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return strconv.Itoa(int(p))
}

// Lower returns the protocol as ipset writes it: "tcp", "udp", "sctp".
func (p Protocol) Lower() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// VirtualServer identifies an IPVS virtual server. It is comparable and is
// its own map key.
type VirtualServer struct {
	Protocol Protocol
	Addr     netip.Addr
	Port     uint16
}

// String returns "TCP/10.96.0.10:53" (brackets around IPv6 addresses).
func (vs VirtualServer) String() string {
	return vs.Protocol.String() + "/" + netip.AddrPortFrom(vs.Addr, vs.Port).String()
}

// ServerOptions are a virtual server's settings.
type ServerOptions struct {
	Scheduler string
	// Persistent with Timeout (seconds) is ClientIP session affinity.
	Persistent bool
	Timeout    uint32
}

// Destination identifies a real server of a virtual server.
type Destination struct {
	Server VirtualServer
	Addr   netip.Addr
	Port   uint16
}

// String returns "10.244.1.5:8080 on TCP/10.96.0.10:53".
func (d Destination) String() string {
	return netip.AddrPortFrom(d.Addr, d.Port).String() + " on " + d.Server.String()
}

// DestOptions are a destination's settings.
type DestOptions struct {
	Weight uint32
}

// SetEntry is one member of one ipset. Which fields are set depends on the
// set's type: bitmap:port uses Port; hash:ip uses Addr; hash:ip,port uses
// Addr, Protocol and Port; hash:ip,port,ip adds Addr2; hash:ip,port,net adds
// Net. Keys always include the set name, so equal members of two sets (a set
// and its -LOCAL twin) never collide.
type SetEntry struct {
	Set      string
	Addr     netip.Addr
	Protocol Protocol
	Port     uint16
	Addr2    netip.Addr
	Net      netip.Prefix
}

// String returns the entry as `ipset save` writes it: "SET 10.96.0.10,tcp:53".
func (e SetEntry) String() string {
	s := e.Set + " "
	switch {
	case !e.Addr.IsValid():
		return s + strconv.Itoa(int(e.Port))
	case e.Protocol == 0:
		return s + e.Addr.String()
	}
	s += fmt.Sprintf("%s,%s:%d", e.Addr, e.Protocol.Lower(), e.Port)
	switch {
	case e.Addr2.IsValid():
		s += "," + e.Addr2.String()
	case e.Net.IsValid():
		s += "," + e.Net.String()
	}
	return s
}

// Sink receives the objects Render produces. The same object may be emitted
// more than once (an address bound for two services); sinks treat repeats as
// one.
type Sink interface {
	Server(vs VirtualServer, opts ServerOptions)
	Destination(d Destination, opts DestOptions)
	Bind(addr netip.Addr)
	Entry(e SetEntry)
}
