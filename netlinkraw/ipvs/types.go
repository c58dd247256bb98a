package ipvs

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Family is an address family of a service or destination.
type Family uint16

// The address families IPVS supports.
const (
	IPv4 Family = unix.AF_INET
	IPv6 Family = unix.AF_INET6
)

// String returns "IPv4", "IPv6" or the number of an unknown family.
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}

// bits returns the address length of the family in bits, or 0.
func (f Family) bits() int {
	switch f {
	case IPv4:
		return 32
	case IPv6:
		return 128
	}
	return 0
}

// familyOf returns the family of an address: IPv4 for a 4-byte address,
// IPv6 for a 16-byte one (including IPv4-mapped IPv6 addresses).
func familyOf(a netip.Addr) Family {
	switch {
	case a.Is4():
		return IPv4
	case a.Is6():
		return IPv6
	}
	return 0
}

// Protocol is the transport protocol of a virtual service (an IP protocol
// number).
type Protocol uint16

// The transport protocols IPVS balances.
const (
	TCP  Protocol = unix.IPPROTO_TCP
	UDP  Protocol = unix.IPPROTO_UDP
	SCTP Protocol = unix.IPPROTO_SCTP
)

// String returns "TCP", "UDP", "SCTP" or the protocol number.
func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return "proto(" + strconv.Itoa(int(p)) + ")"
}

// ServiceFlags are the IP_VS_SVC_F_* flags of a virtual service.
type ServiceFlags uint32

// Service flags, from linux/ip_vs.h.
const (
	// FlagPersistent makes connections from one client stick to one
	// destination for Service.Timeout seconds (session affinity).
	FlagPersistent ServiceFlags = 0x0001
	// FlagHashed is set by the kernel on every service in its table; dumps
	// report it, and the kernel ignores it on create and update.
	FlagHashed ServiceFlags = 0x0002
	// FlagOnePacket schedules every UDP datagram on its own.
	FlagOnePacket ServiceFlags = 0x0004
	// FlagSchedSHFallback lets the sh scheduler fall back to another
	// destination when the chosen one is unavailable (scheduler flag 1).
	FlagSchedSHFallback ServiceFlags = 0x0008
	// FlagSchedSHPort makes the sh scheduler hash the source port too
	// (scheduler flag 2).
	FlagSchedSHPort ServiceFlags = 0x0010
	// FlagSched3 is the third scheduler-specific flag.
	FlagSched3 ServiceFlags = 0x0020

	// FlagSchedMHFallback is the mh scheduler's name for scheduler flag 1.
	FlagSchedMHFallback = FlagSchedSHFallback
	// FlagSchedMHPort is the mh scheduler's name for scheduler flag 2.
	FlagSchedMHPort = FlagSchedSHPort
)

var flagNames = []struct {
	f    ServiceFlags
	name string
}{
	{FlagPersistent, "persistent"},
	{FlagHashed, "hashed"},
	{FlagOnePacket, "one-packet"},
	{FlagSchedSHFallback, "sched1"},
	{FlagSchedSHPort, "sched2"},
	{FlagSched3, "sched3"},
}

// String lists the flags by name, separated by "|".
func (f ServiceFlags) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for _, n := range flagNames {
		if f&n.f != 0 {
			parts = append(parts, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(f)))
	}
	return strings.Join(parts, "|")
}

// ForwardMethod is how IPVS sends packets to a destination.
type ForwardMethod uint32

// Forwarding methods (IP_VS_CONN_F_* under IP_VS_CONN_F_FWD_MASK).
const (
	Masquerade   ForwardMethod = 0 // NAT; what kube-proxy uses
	LocalNode    ForwardMethod = 1
	Tunnel       ForwardMethod = 2
	DirectRoute  ForwardMethod = 3
	Bypass       ForwardMethod = 4
	forwardMask  ForwardMethod = 0x7
	forwardNames               = "masq local tunnel route bypass"
)

// String returns the ipvsadm-style name of the method.
func (m ForwardMethod) String() string {
	names := strings.Fields(forwardNames)
	if int(m) < len(names) {
		return names[m]
	}
	return "fwd(" + strconv.Itoa(int(m)) + ")"
}

// TunnelType is the encapsulation of a Tunnel destination.
type TunnelType uint8

// Tunnel types (IP_VS_CONN_F_TUNNEL_TYPE_*).
const (
	TunnelIPIP TunnelType = 0
	TunnelGUE  TunnelType = 1
	TunnelGRE  TunnelType = 2
)

// TunnelFlags are the IP_VS_TUNNEL_ENCAP_FLAG_* flags of a tunnel.
type TunnelFlags uint16

// Tunnel encapsulation flags.
const (
	TunnelChecksum       TunnelFlags = 1 << 0
	TunnelRemoteChecksum TunnelFlags = 1 << 1
)

// Service is a virtual service: what clients connect to. A service is
// either addressed by protocol, address and port, or by a firewall mark
// (FWMark non-zero; then Protocol, Address and Port stay zero and Family must
// be set).
//
// Service is a comparable value; Key returns the part the kernel identifies
// it by.
type Service struct {
	// Family is IPv4 or IPv6. It may be left zero when Address is set: the
	// family of the address is used. Dumps always fill it in.
	Family   Family
	Protocol Protocol
	Address  netip.Addr
	Port     uint16
	FWMark   uint32

	// Scheduler names the scheduling algorithm ("rr", "wrr", "lc", "wlc",
	// "sh", "mh", ...); the kernel loads ip_vs_<name> on demand. "none"
	// binds no scheduler. Required: the kernel has no default.
	Scheduler string
	Flags     ServiceFlags
	// Timeout is the persistence timeout in seconds (with FlagPersistent).
	Timeout uint32
	// Netmask is the prefix length that groups clients for persistence: 32
	// (IPv4) or 128 (IPv6) gives each client address its own affinity.
	// Zero on create or update means the full length (what ipvsadm and
	// kube-proxy send); dumps report the kernel's value, so a service
	// created with 0 reads back with 32 or 128. (An IPv4 mask of 0.0.0.0
	// that another tool set reads back as 0.)
	Netmask uint8
	// PEName is the persistence engine, "" for none ("sip" exists).
	PEName string
}

// ServiceKey identifies a virtual service in the kernel; it is a comparable
// map key.
type ServiceKey struct {
	Family   Family
	Protocol Protocol
	Address  netip.Addr
	Port     uint16
	FWMark   uint32
}

// Key returns the identity of the service, with the family filled in from
// the address when it was left zero, and protocol/address/port cleared for
// firewall-mark services (the kernel ignores them there).
func (s Service) Key() ServiceKey {
	f := s.Family
	if f == 0 {
		f = familyOf(s.Address)
	}
	if s.FWMark != 0 {
		return ServiceKey{Family: f, FWMark: s.FWMark}
	}
	return ServiceKey{Family: f, Protocol: s.Protocol, Address: s.Address, Port: s.Port}
}

// String formats the service as in error messages: "TCP/10.96.0.10:53",
// "UDP/[fd00::10]:53" or "FWM/7 (IPv4)".
func (s Service) String() string { return s.Key().String() }

// String formats the key like Service.String.
func (k ServiceKey) String() string {
	if k.FWMark != 0 {
		return fmt.Sprintf("FWM/%d (%s)", k.FWMark, k.Family)
	}
	return k.Protocol.String() + "/" + netip.AddrPortFrom(k.Address, k.Port).String()
}

// Destination is a real server behind a virtual service. It is a comparable
// value.
type Destination struct {
	// Family may be left zero: the family of Address is used. It differs
	// from the service's family only with Tunnel forwarding.
	Family  Family
	Address netip.Addr
	Port    uint16
	Forward ForwardMethod
	// Weight is the share of new connections (u32 on the wire; 0 stops new
	// connections without removing the destination).
	Weight         uint32
	UpperThreshold uint32 // maximum active connections, 0 for no limit
	LowerThreshold uint32
	TunnelType     TunnelType
	TunnelPort     uint16 // for GUE
	TunnelFlags    TunnelFlags
}

// DestinationKey identifies a destination within its service.
type DestinationKey struct {
	Family  Family
	Address netip.Addr
	Port    uint16
}

// Key returns the identity of the destination within its service.
func (d Destination) Key() DestinationKey {
	f := d.Family
	if f == 0 {
		f = familyOf(d.Address)
	}
	return DestinationKey{Family: f, Address: d.Address, Port: d.Port}
}

// String formats the destination as "10.244.1.5:8080" or "[fd00::5]:8080".
func (d Destination) String() string { return d.Key().String() }

// String formats the key like Destination.String.
func (k DestinationKey) String() string {
	return netip.AddrPortFrom(k.Address, k.Port).String()
}

// Stats are the kernel's 64-bit counters of a service or destination.
// Rates are per second, estimated by the kernel.
type Stats struct {
	Connections uint64
	PacketsIn   uint64
	PacketsOut  uint64
	BytesIn     uint64
	BytesOut    uint64
	CPS         uint64 // connections per second
	PPSIn       uint64
	PPSOut      uint64
	BPSIn       uint64
	BPSOut      uint64
}

// ServiceEntry is a service as a dump reports it, with its counters.
type ServiceEntry struct {
	Service Service
	Stats   Stats
}

// DestinationEntry is a destination as a dump reports it, with its
// connection counts and counters.
type DestinationEntry struct {
	Destination     Destination
	ActiveConns     uint32
	InactiveConns   uint32
	PersistentConns uint32
	Stats           Stats
}

// Info is the kernel's IPVS version and connection table size.
type Info struct {
	// Version is the IPVS version, e.g. 0x010201 for 1.2.1.
	Version uint32
	// ConnTableSize is the number of buckets of the connection hash table.
	ConnTableSize uint32
}

// VersionString formats Version as "1.2.1".
func (i Info) VersionString() string {
	return fmt.Sprintf("%d.%d.%d", i.Version>>16&0xff, i.Version>>8&0xff, i.Version&0xff)
}

// Config holds the connection timeouts, in seconds. In SetConfig a zero
// field leaves that timeout unchanged (the kernel's semantics).
type Config struct {
	TCP    uint32 // established TCP connections
	TCPFin uint32 // TCP connections after FIN
	UDP    uint32
}
