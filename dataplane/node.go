package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/kernel"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"golang.org/x/sys/unix"
)

// NodeConfig is how the node is prepared and which kernel objects the sink
// owns.
type NodeConfig struct {
	// Families are the IP families the node serves.
	Families []rules.Family
	// Dummy is the link holding bound addresses (default kube-ipvs0).
	Dummy string
	// Scheduler is the default scheduler, whose module must be present.
	Scheduler string
	// Rules configures the iptables rules.
	Rules rules.Config
	// StrictARP sets arp_ignore=1 and arp_announce=2.
	StrictARP bool
	// TCPTimeout, TCPFinTimeout and UDPTimeout set IPVS's connection
	// timeouts when non-zero.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// NodeAddresses are the addresses NodePorts are served on, and
	// NodePortRange their ports: a virtual server on such an address and
	// port is the sink's.
	NodeAddresses []netip.Addr
	NodePortRange [2]uint16
	// ExcludeCIDRs are never touched, whatever their address
	// (--ipvs-exclude-cidrs).
	ExcludeCIDRs []netip.Prefix
	// IPSetMaxElem and IPSetHashSize size the hash sets (65536 and 1024).
	IPSetMaxElem, IPSetHashSize uint32
}

func (c *NodeConfig) defaults() {
	if c.Dummy == "" {
		c.Dummy = link.DefaultDummy
	}
	if c.NodePortRange == [2]uint16{} {
		c.NodePortRange = [2]uint16{30000, 32767}
	}
	if c.IPSetMaxElem == 0 {
		c.IPSetMaxElem = 65536
	}
	if c.IPSetHashSize == 0 {
		c.IPSetHashSize = 1024
	}
	if len(c.Families) == 0 {
		c.Families = []rules.Family{rules.IPv4}
	}
}

// Node prepares the kernel and reads back what the sink owns.
type Node struct {
	Cfg    NodeConfig
	Kernel *Kernel
	// Modules and Sysctl default to the running kernel's.
	Modules kernel.Modules
	Sysctl  kernel.Sysctl
	// Rules runs iptables tools (default rules.Exec).
	RulesRunner rules.Runner
	Log         *slog.Logger
}

// Setup makes the node ready for the sink: modules loaded, sysctls set, IPVS
// timeouts, the dummy link, every kube-proxy ipset, and the iptables rules.
// It writes only what differs, so it is cheap to repeat. It needs the real
// kernel; a dry run skips it.
func (n *Node) Setup() error {
	n.Cfg.defaults()
	log := n.Log
	if log == nil {
		log = slog.Default()
	}
	v, err := kernel.Running()
	if err != nil {
		return err
	}
	if err := n.Modules.Ensure(kernel.RequiredIPVSModules(v, n.Cfg.Scheduler)); err != nil {
		return err
	}
	// Schedulers a service may pick by annotation are loaded now too: a
	// scheduler module the kernel loads on first use can deadlock against
	// the cleanup of a dying network namespace. Missing ones are only
	// reported; services asking for them fail and are retried.
	var more []string
	for _, s := range render.Schedulers {
		more = append(more, "ip_vs_"+s)
	}
	if err := n.Modules.Ensure(more); err != nil {
		log.Warn("some IPVS schedulers are unavailable", "error", err)
	}
	wrote, err := kernel.EnsureAll(n.Sysctl, kernel.IPVSSysctls(v, n.Cfg.StrictARP))
	if err != nil {
		return err
	}
	if wrote > 0 {
		log.Info("sysctls set", "count", wrote)
	}
	if err := n.timeouts(); err != nil {
		return err
	}
	if _, err := n.Kernel.Link.EnsureDummy(n.Cfg.Dummy); err != nil {
		return err
	}
	if err := CreateSets(n.Kernel.IPSet, n.Cfg.Families, n.Cfg.IPSetHashSize, n.Cfg.IPSetMaxElem); err != nil {
		return err
	}
	if err := n.Cfg.Rules.Validate(); err != nil {
		return err
	}
	run := n.RulesRunner
	if run == nil {
		run = rules.Exec
	}
	for _, f := range n.Cfg.Families {
		b, err := rules.Detect(f, run)
		if err != nil {
			return err
		}
		in := &rules.Installer{Backend: b, Run: run}
		changed, err := in.Ensure(rules.Build(n.Cfg.Rules, f))
		if err != nil {
			return err
		}
		if changed {
			log.Info("iptables rules installed", "family", f.String(), "backend", string(b))
		}
	}
	return nil
}

// CreateSets creates every kube-proxy ipset of the families unless it
// exists: hash sets with the given hash size and maximum size, bitmap:port
// sets over every port.
func CreateSets(c ipset.Client, families []rules.Family, hashSize, maxElem uint32) error {
	for _, f := range families {
		for _, name := range rules.Sets(f) {
			s := ipset.Set{Name: name, Type: ipset.Type(rules.SetType(name))}
			if s.Type == ipset.BitmapPort {
				s.PortFrom, s.PortTo = 0, 65535
			} else {
				s.Family, s.HashSize, s.MaxElem = ipset.INET, hashSize, maxElem
				if f == rules.IPv6 {
					s.Family = ipset.INET6
				}
			}
			if err := c.Create(s, ipset.Exist); err != nil {
				return fmt.Errorf("dataplane: create ipset %s: %w", name, err)
			}
		}
	}
	return nil
}

func (n *Node) timeouts() error {
	if n.Cfg.TCPTimeout == 0 && n.Cfg.TCPFinTimeout == 0 && n.Cfg.UDPTimeout == 0 {
		return nil
	}
	cur, err := n.Kernel.IPVSConn.Config()
	if err != nil {
		return fmt.Errorf("dataplane: read IPVS timeouts: %w", err)
	}
	want := cur
	set := func(dst *uint32, d time.Duration) {
		if d > 0 {
			*dst = uint32(d / time.Second)
		}
	}
	set(&want.TCP, n.Cfg.TCPTimeout)
	set(&want.TCPFin, n.Cfg.TCPFinTimeout)
	set(&want.UDP, n.Cfg.UDPTimeout)
	if want == cur {
		return nil
	}
	if err := n.Kernel.IPVSConn.SetConfig(want); err != nil {
		return fmt.Errorf("dataplane: set IPVS timeouts: %w", err)
	}
	return nil
}

// State is the kernel objects the sink owns, as read at start-up.
type State struct {
	Servers  map[render.VirtualServer]render.ServerOptions
	Dests    map[render.Destination]render.DestOptions
	Bindings []netip.Addr
	Entries  []render.SetEntry
	// Visible, when not nil, reports whether the read could see a virtual
	// server (and its destinations) as the sink's: one on an address not
	// bound at the time of the read (its binding failed, or was removed
	// by hand) is not, and its absence from Servers says nothing.
	Visible func(render.VirtualServer) bool `json:"-"`
}

func excluded(a netip.Addr, cidrs []netip.Prefix) bool {
	for _, p := range cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Owned reports whether a virtual server belongs to the sink: its address is
// bound on the dummy link, or it is a node port on a node address; and it is
// not in an excluded range. Everything else (keepalived's services, another
// tool's) is never changed or removed.
func (c *NodeConfig) Owned(vs render.VirtualServer, bound map[netip.Addr]bool) bool {
	if excluded(vs.Addr, c.ExcludeCIDRs) {
		return false
	}
	if bound[vs.Addr] {
		return true
	}
	for _, n := range c.NodeAddresses {
		if n == vs.Addr && vs.Port >= c.NodePortRange[0] && vs.Port <= c.NodePortRange[1] {
			return true
		}
	}
	return false
}

// Read dumps what the sink owns: virtual servers it owns with their
// destinations, the dummy link's addresses, and the entries of its ipsets.
// Sets or the link that do not exist yet are simply empty.
func (n *Node) Read() (*State, error) {
	n.Cfg.defaults()
	st := &State{Servers: map[render.VirtualServer]render.ServerOptions{}, Dests: map[render.Destination]render.DestOptions{}}
	addrs, err := n.Kernel.Link.Addresses(n.Cfg.Dummy)
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return nil, err
	}
	bound := map[netip.Addr]bool{}
	for _, a := range addrs {
		bound[a] = true
		if !excluded(a, n.Cfg.ExcludeCIDRs) {
			st.Bindings = append(st.Bindings, a)
		}
	}
	st.Visible = func(vs render.VirtualServer) bool { return n.Cfg.Owned(vs, bound) }
	svcs, err := n.Kernel.IPVSConn.Services()
	if err != nil {
		return nil, err
	}
	for _, se := range svcs {
		s := se.Service
		if s.FWMark != 0 {
			continue
		}
		vs := render.VirtualServer{Protocol: render.Protocol(s.Protocol), Addr: s.Address, Port: s.Port}
		if !n.Cfg.Owned(vs, bound) {
			continue
		}
		st.Servers[vs] = render.ServerOptions{Scheduler: s.Scheduler, Persistent: s.Flags&ipvs.FlagPersistent != 0, Timeout: s.Timeout}
		if !st.Servers[vs].Persistent {
			o := st.Servers[vs]
			o.Timeout = 0
			st.Servers[vs] = o
		}
		dests, err := n.Kernel.IPVSConn.Destinations(s.Key())
		if err != nil {
			return nil, err
		}
		for _, de := range dests {
			d := de.Destination
			st.Dests[render.Destination{Server: vs, Addr: d.Address, Port: d.Port}] = render.DestOptions{Weight: d.Weight}
		}
	}
	for _, f := range n.Cfg.Families {
		for _, name := range rules.Sets(f) {
			_, entries, err := n.Kernel.IPSet.List(name)
			if ipset.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				st.Entries = append(st.Entries, FromEntry(name, e))
			}
		}
	}
	return st, nil
}
