package ipset

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Type is an ipset set type name as the kernel and the ipset CLI spell it.
type Type string

// The set types proxysinks programs.
const (
	HashIP        Type = "hash:ip"
	HashIPPort    Type = "hash:ip,port"
	HashIPPortIP  Type = "hash:ip,port,ip"
	HashIPPortNet Type = "hash:ip,port,net"
	HashNet       Type = "hash:net"
	BitmapPort    Type = "bitmap:port"
)

// Types lists every supported set type.
var Types = []Type{HashIP, HashIPPort, HashIPPortIP, HashIPPortNet, HashNet, BitmapPort}

// IsHash reports whether t is a hash type (hashsize and maxelem apply).
func (t Type) IsHash() bool { return strings.HasPrefix(string(t), "hash:") }

// HasPort reports whether entries of t carry a port (and, for hash types, a
// protocol).
func (t Type) HasPort() bool { return strings.Contains(string(t), "port") }

// supported reports whether this package can encode and decode t.
func (t Type) supported() bool {
	for _, s := range Types {
		if s == t {
			return true
		}
	}
	return false
}

// Family is the address family of a set: INET or INET6. bitmap:port sets
// have no family (Unspec).
type Family uint8

// Set families, with their NFPROTO values.
const (
	Unspec Family = nfprotoUnspec
	INET   Family = nfprotoIPv4
	INET6  Family = nfprotoIPv6
)

// String returns the family as `ipset save` prints it.
func (f Family) String() string {
	switch f {
	case INET:
		return "inet"
	case INET6:
		return "inet6"
	case Unspec:
		return "unspec"
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}

// familyOf returns the family of an address.
func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return INET
	}
	return INET6
}

// Proto is the IP protocol number of a port entry.
type Proto uint8

// Protocols of port entries.
const (
	TCP    Proto = 6
	UDP    Proto = 17
	SCTP   Proto = 132
	ICMP   Proto = 1
	ICMPv6 Proto = 58
)

// String returns the protocol name as ipset prints it.
func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	case ICMP:
		return "icmp"
	case ICMPv6:
		return "icmpv6"
	case 0:
		return ""
	}
	return "proto" + strconv.Itoa(int(p))
}

// Set describes a set to create: its name, type, family and creation
// options. It is comparable.
type Set struct {
	// Name is at most 31 bytes.
	Name string
	// Type is the set type.
	Type Type
	// Family is INET or INET6 for hash types; it is ignored for bitmap:port.
	Family Family
	// HashSize is the initial hash size of hash types (the kernel rounds it
	// up to a power of two, at least 64); 0 means the kernel default, 1024.
	HashSize uint32
	// MaxElem is the maximal number of elements of hash types; 0 means the
	// kernel default, 65536.
	MaxElem uint32
	// PortFrom and PortTo are the inclusive range of bitmap:port sets.
	PortFrom, PortTo uint16
	// Timeout is the default timeout in seconds of entries. A set created
	// with a non-zero Timeout supports per-entry timeouts.
	Timeout uint32
	// Counters enables packet and byte counters on entries.
	Counters bool
	// Comment enables a comment on entries.
	Comment bool
}

// Header is a set's description as the kernel reports it: the creation
// parameters (with kernel defaults filled in) and its run-time figures.
type Header struct {
	Set
	// Revision is the revision of the set type the kernel chose.
	Revision uint8
	// BucketSize is the bucket size of hash types (revisions that report it).
	BucketSize uint8
	// Elements is the number of entries (0 when the kernel does not report
	// it).
	Elements uint32
	// References counts the kernel objects (iptables rules) using the set.
	References uint32
	// MemSize is the memory the set uses, in bytes.
	MemSize uint32
}

// Entry is one element of a set. Which fields apply depends on the set type:
//
//	hash:ip           IP
//	hash:ip,port      IP, Proto, Port
//	hash:ip,port,ip   IP, Proto, Port, IP2
//	hash:ip,port,net  IP, Proto, Port, Net
//	hash:net          Net
//	bitmap:port       Port
//
// The extension fields (Timeout, Packets, Bytes, Comment) apply when the set
// was created with them. Entry is comparable; Key strips the extensions.
type Entry struct {
	// IP is the first address dimension.
	IP netip.Addr
	// Proto and Port are the port dimension; Proto is 0 for bitmap:port.
	Proto Proto
	Port  uint16
	// IP2 is the third dimension of hash:ip,port,ip.
	IP2 netip.Addr
	// Net is the network of hash:net and the third dimension of
	// hash:ip,port,net.
	Net netip.Prefix
	// NoMatch marks a hash:net or hash:ip,port,net entry as an exception.
	NoMatch bool

	// Timeout is the entry's timeout in seconds (remaining time when
	// listed); 0 means the set's default.
	Timeout uint32
	// Packets and Bytes are the counters (initial values on Add).
	Packets, Bytes uint64
	// Comment is the entry's comment.
	Comment string
}

// Key returns the entry without its extension fields: what identifies it
// in its set.
func (e Entry) Key() Entry {
	return Entry{IP: e.IP, Proto: e.Proto, Port: e.Port, IP2: e.IP2, Net: e.Net}
}

// String returns the entry in the syntax of the ipset CLI (without
// extensions), e.g. "10.96.0.10,tcp:53".
func (e Entry) String() string {
	var parts []string
	switch {
	case e.IP.IsValid():
		parts = append(parts, e.IP.String())
	case e.Net.IsValid() && !e.IP.IsValid():
		parts = append(parts, e.Net.String())
	}
	if e.Proto != 0 {
		parts = append(parts, fmt.Sprintf("%s:%d", e.Proto, e.Port))
	} else if !e.IP.IsValid() && !e.Net.IsValid() {
		parts = append(parts, strconv.Itoa(int(e.Port)))
	} else if e.Port != 0 {
		parts = append(parts, strconv.Itoa(int(e.Port)))
	}
	if e.IP2.IsValid() {
		parts = append(parts, e.IP2.String())
	}
	if e.IP.IsValid() && e.Net.IsValid() {
		parts = append(parts, e.Net.String())
	}
	s := strings.Join(parts, ",")
	if e.NoMatch {
		s += " nomatch"
	}
	return s
}

// Option changes how one call treats already existing or missing objects.
type Option uint8

const (
	// Exist makes a call tolerate what already is: Create succeeds when an
	// identical set exists, Add when the entry is present, Del when it is
	// absent, Destroy when the set is absent. Without it these are errors.
	Exist Option = iota + 1
)

// hasExist reports whether opts contains Exist.
func hasExist(opts []Option) bool {
	for _, o := range opts {
		if o == Exist {
			return true
		}
	}
	return false
}
