package ipset

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrInvalidEntry says an entry's fields do not fit its set's type. It is
// decided locally, before anything is sent: the kernel would refuse the
// whole message, not the entry alone.
var ErrInvalidEntry = errors.New("entry does not fit the set type")

// dims says which fields a set type's entries carry.
type dims struct {
	ip, net, port, proto, ip2, net2, nomatch bool
}

func dimsOf(t Type) dims {
	switch t {
	case HashIP:
		return dims{ip: true}
	case HashIPPort:
		return dims{ip: true, port: true, proto: true}
	case HashIPPortIP:
		return dims{ip: true, port: true, proto: true, ip2: true}
	case HashIPPortNet:
		return dims{ip: true, port: true, proto: true, net2: true, nomatch: true}
	case HashNet:
		return dims{net: true, nomatch: true}
	case BitmapPort:
		return dims{port: true}
	}
	return dims{}
}

// CheckEntry reports whether e fits a set of type t and family f: the
// dimensions of the type are present, no others are, and addresses are of
// the set's family. Errors wrap ErrInvalidEntry or ErrInvalidFamily. The
// kernel's own checks (protocol present, prefix length, port range...) are
// not repeated here.
func CheckEntry(t Type, f Family, e Entry) error {
	if err := checkEntry(e); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEntry, err)
	}
	d := dimsOf(t)
	bad := func(what string) error {
		return fmt.Errorf("%w: %s entries %s", ErrInvalidEntry, t, what)
	}
	switch {
	case d.ip != e.IP.IsValid():
		if d.ip {
			return bad("need an IP")
		}
		return bad("take no IP")
	case (d.net || d.net2) != e.Net.IsValid():
		if d.net || d.net2 {
			return bad("need a network")
		}
		return bad("take no network")
	case d.ip2 != e.IP2.IsValid():
		if d.ip2 {
			return bad("need a second IP")
		}
		return bad("take no second IP")
	case !d.port && e.Port != 0:
		return bad("take no port")
	case !d.proto && e.Proto != 0:
		return bad("take no protocol")
	case !d.nomatch && e.NoMatch:
		return bad("take no nomatch flag")
	}
	if t == BitmapPort {
		return nil
	}
	for _, a := range []netip.Addr{e.IP, e.IP2, e.Net.Addr()} {
		if a.IsValid() && familyOf(a) != f {
			return fmt.Errorf("%w: %s address %s in a %s set", ErrInvalidFamily, familyOf(a), a, f)
		}
	}
	return nil
}
