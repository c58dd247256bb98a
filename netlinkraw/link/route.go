//go:build linux

package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the local routes this package adds (the rtm_protocol
// of each): the routes it lists and deletes are only those, never the
// kernel's own local route of an address (protocol "kernel") or anyone
// else's. 156 is assigned to no routing daemon in linux/rtnetlink.h or
// iproute2's rt_protos; `ip route show table local proto 156` lists ours.
const RouteProtocol = 156

// localRoute builds the message for the local route of addr on link index:
// in the local table, of type local, scope host, like the route the kernel
// adds for an address. An IPv4 route names addr as its preferred source,
// so that connections the node opens to addr come from addr, as they do
// when addr is bound as an address. A local route makes addr local to the
// node (packets to it are delivered to the node, where IPVS takes them;
// sockets can bind it) without an entry in the link's address list, whose
// length makes each address insert slower than the last.
func localRoute(index uint32, addr netip.Addr) *rtnetlink.RouteMessage {
	family, bits := uint8(unix.AF_INET), uint8(32)
	ip := net.IP(addr.AsSlice())
	attrs := rtnetlink.RouteAttributes{Dst: ip, OutIface: index}
	if addr.Is6() {
		family, bits = unix.AF_INET6, 128
	} else {
		attrs.Src = ip
	}
	return &rtnetlink.RouteMessage{
		Family:     family,
		DstLength:  bits,
		Table:      unix.RT_TABLE_LOCAL,
		Protocol:   RouteProtocol,
		Scope:      unix.RT_SCOPE_HOST,
		Type:       unix.RTN_LOCAL,
		Attributes: attrs,
	}
}

func routeEncoder(index uint32) func(netip.Addr) ([]byte, error) {
	return func(a netip.Addr) ([]byte, error) { return localRoute(index, a).MarshalBinary() }
}

// checkAddrs refuses addresses that cannot be sent to the kernel.
func checkAddrs(op, name string, addrs []netip.Addr) error {
	for _, a := range addrs {
		if !a.IsValid() || a.Zone() != "" {
			return &Error{Op: op, Object: fmt.Sprintf("%v on %s", a, name), Err: errors.New("not a plain IP address")}
		}
	}
	return nil
}

// AddLocalRoutes makes each address local to the node with a local route
// (RouteProtocol) through the link named name, instead of binding it as an
// address. Routes already there are not errors (EEXIST). Like AddAddresses
// it sends batches, many routes per sendmsg, names each failed address and
// goes on past failures.
func (c *Conn) AddLocalRoutes(name string, addrs []netip.Addr) error {
	l, err := c.LinkByName(name)
	if err != nil {
		return err
	}
	if err := checkAddrs("add local route", name, addrs); err != nil {
		return err
	}
	// Appended, not exclusive: the address's own local route (protocol
	// kernel, while an address binding is being replaced) has the same
	// key, and an exclusive add would be refused with the same EEXIST as
	// our own route already there. The kernel still refuses an exact
	// duplicate of ours with EEXIST.
	return c.batch("add local route", name, unix.RTM_NEWROUTE, netlink.Create|netlink.Append, addrs, routeEncoder(l.Index), unix.EEXIST)
}

// DelLocalRoutes deletes the local routes (RouteProtocol) of the addresses
// through the link named name. Routes not there are not errors (ESRCH).
func (c *Conn) DelLocalRoutes(name string, addrs []netip.Addr) error {
	l, err := c.LinkByName(name)
	if err != nil {
		return err
	}
	if err := checkAddrs("delete local route", name, addrs); err != nil {
		return err
	}
	return c.batch("delete local route", name, unix.RTM_DELROUTE, 0, addrs, routeEncoder(l.Index), unix.ESRCH)
}

// LocalRoutes returns the addresses of the local routes (RouteProtocol)
// through the link named name, sorted: one dump, filtered by the kernel.
func (c *Conn) LocalRoutes(name string) ([]netip.Addr, error) {
	l, err := c.LinkByName(name)
	if err != nil {
		return nil, err
	}
	// With strict checking the kernel (4.20 and later) sends only the
	// routes matching the request's table, protocol, type and link, not
	// the whole local table (one route per address bound anywhere); the
	// filter below keeps the same ones where it sends everything.
	match := &rtnetlink.RouteMessage{Table: unix.RT_TABLE_LOCAL, Protocol: RouteProtocol, Type: unix.RTN_LOCAL,
		Attributes: rtnetlink.RouteAttributes{OutIface: l.Index}}
	var ms []rtnetlink.RouteMessage
	err = c.call(func() error {
		if err := c.c.SetOption(netlink.GetStrictCheck, true); err != nil {
			return err
		}
		var lerr error
		ms, lerr = c.c.Route.ListMatch(match)
		return errors.Join(lerr, c.c.SetOption(netlink.GetStrictCheck, false))
	})
	if err != nil {
		return nil, &Error{Op: "list", Object: "local routes", Err: err}
	}
	var out []netip.Addr
	for _, m := range ms {
		table := uint32(m.Table)
		if m.Attributes.Table != 0 {
			table = m.Attributes.Table
		}
		if table != unix.RT_TABLE_LOCAL || m.Type != unix.RTN_LOCAL || m.Protocol != RouteProtocol || m.Attributes.OutIface != l.Index {
			continue
		}
		a, ok := netip.AddrFromSlice(m.Attributes.Dst)
		if !ok {
			continue
		}
		if m.Family == unix.AF_INET {
			a = a.Unmap()
		}
		if int(m.DstLength) != a.BitLen() {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}
