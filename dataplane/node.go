package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"golang.org/x/sys/unix"
)

// NodeConfig is how the node is prepared and which kernel objects the sink
// owns.
type NodeConfig struct {
	// Families are the IP families the node serves.
	Families []xtables.Family
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
		c.Families = []xtables.Family{xtables.IPv4}
	}
}

// Node prepares the kernel and reads back what the sink owns.
type Node struct {
	Cfg    NodeConfig
	Kernel *Kernel
	// Modules and Sysctl default to the running kernel's.
	Modules kernel.Modules
	Sysctl  kernel.Sysctl
	// Rules runs iptables tools (default xtables.Exec).
	RulesRunner xtables.Runner
	Log         *slog.Logger

	// backends are the iptables backends detected, one per family of
	// Cfg.Families in order, detected once.
	backends []xtables.Backend
}

// Setup makes the node ready for the sink: modules loaded, then Repair
// (sysctls, IPVS timeouts, the dummy link, every kube-proxy ipset, the
// iptables rules). It needs the real kernel; a dry run skips it.
func (n *Node) Setup() error {
	n.Cfg.defaults()
	v, err := kernel.Running()
	if err != nil {
		return err
	}
	if err := n.Modules.Ensure(RequiredIPVSModules(v, n.Cfg.Scheduler)); err != nil {
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
		n.log().Warn("some IPVS schedulers are unavailable", "error", err)
	}
	repaired, err := n.Repair()
	if len(repaired) > 0 {
		n.log().Info("node prepared", "written", repaired)
	}
	return err
}

func (n *Node) log() *slog.Logger {
	if n.Log == nil {
		return slog.Default()
	}
	return n.Log
}

// Repair checks the pieces of the node that Setup prepares and that can
// drift while the sink runs (a sysctl reset, an IPVS timeout changed, the
// dummy link deleted, an ipset destroyed, iptables rules flushed or a jump
// deleted) and writes only what differs: with nothing drifted it only
// reads. It returns what it wrote, one short description each, in a
// stable order. A piece that fails does not stop the others; the errors
// are joined. The sinks run it before every resync (--sync-period).
func (n *Node) Repair() ([]string, error) {
	n.Cfg.defaults()
	var wrote []string
	var errs []error
	v, err := kernel.Running()
	if err != nil {
		return nil, err
	}
	settings := IPVSSysctls(v, n.Cfg.StrictARP)
	for _, st := range settings {
		w, err := kernel.EnsureSysctl(n.Sysctl, st.Name, st.Value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if w {
			wrote = append(wrote, "sysctl "+st.Name)
		}
	}
	if w, err := n.timeouts(); err != nil {
		errs = append(errs, err)
	} else if w {
		wrote = append(wrote, "IPVS timeouts")
	}
	if w, err := n.dummy(); err != nil {
		errs = append(errs, err)
	} else if w {
		wrote = append(wrote, "link "+n.Cfg.Dummy)
	}
	created, err := EnsureSets(n.Kernel.IPSet, n.Cfg.Families, n.Cfg.IPSetHashSize, n.Cfg.IPSetMaxElem)
	for _, s := range created {
		wrote = append(wrote, "ipset "+s)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if err := n.Cfg.Rules.Validate(); err != nil {
		return wrote, errors.Join(append(errs, err)...)
	}
	w, err := n.ensureRules(n.Cfg.Families)
	wrote = append(wrote, w...)
	if err != nil {
		errs = append(errs, err)
	}
	return wrote, errors.Join(errs...)
}

// EnsureRules brings the iptables rules of the families (of the node's)
// to what they must be now: the constant ruleset and the
// KUBE-IPVS-OUT-FILTER drops that follow from the kernel's
// KUBE-LOAD-BALANCER-FW and KUBE-LOAD-BALANCER-SOURCE-IP members. It
// reports whether it wrote. The sinks run it through
// Applier.EntryRules after a plan changed those members; Repair runs it
// for every family.
func (n *Node) EnsureRules(families []xtables.Family) (bool, error) {
	w, err := n.ensureRules(families)
	return len(w) > 0, err
}

func (n *Node) ensureRules(families []xtables.Family) ([]string, error) {
	var wrote []string
	var errs []error
	run := n.RulesRunner
	if run == nil {
		run = xtables.Exec
	}
	for i, f := range n.Cfg.Families {
		if len(n.backends) <= i {
			b, err := xtables.Detect(f, run)
			if err != nil {
				errs = append(errs, err)
				break
			}
			n.backends = append(n.backends, b)
		}
		if !slices.Contains(families, f) {
			continue
		}
		b := n.backends[i]
		drops, err := n.outFilterDrops(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		in := &rules.Installer{Backend: b, Run: run}
		changed, err := in.Ensure(rules.Build(n.Cfg.Rules, f).WithOutFilter(drops))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if changed {
			wrote = append(wrote, fmt.Sprintf("iptables rules (%s, %s)", f, b))
		}
	}
	return wrote, errors.Join(errs...)
}

// outFilterDrops reads the family's KUBE-LOAD-BALANCER-FW and
// KUBE-LOAD-BALANCER-SOURCE-IP members and returns the drops they call for
// (rules.OutFilterDrops).
func (n *Node) outFilterDrops(f xtables.Family) ([]rules.OutFilterDrop, error) {
	read := func(set string, nodeAccess bool) ([]rules.OutFilterDrop, error) {
		_, es, err := n.Kernel.IPSet.List(set)
		if err != nil {
			return nil, fmt.Errorf("dataplane: list ipset %s: %w", set, err)
		}
		out := make([]rules.OutFilterDrop, 0, len(es))
		for _, e := range es {
			if nodeAccess && e.IP2 != e.IP {
				continue
			}
			out = append(out, rules.OutFilterDrop{Addr: e.IP, Protocol: uint8(e.Proto), Port: e.Port})
		}
		return out, nil
	}
	fw, err := read(rules.SetName(f, rules.SetLoadBalancerFW), false)
	if err != nil || len(fw) == 0 {
		return nil, err
	}
	allowed, err := read(rules.SetName(f, rules.SetLoadBalancerSrcIP), true)
	if err != nil {
		return nil, err
	}
	return rules.OutFilterDrops(fw, allowed), nil
}

// dummy makes sure the dummy link exists, and reports whether it created
// it.
func (n *Node) dummy() (bool, error) {
	if _, err := n.Kernel.Link.Addresses(n.Cfg.Dummy); err == nil {
		return false, nil
	} else if !errors.Is(err, unix.ENODEV) {
		return false, err
	}
	if _, err := n.Kernel.Link.EnsureDummy(n.Cfg.Dummy); err != nil {
		return false, err
	}
	return true, nil
}

// EnsureSets creates the kube-proxy ipsets of the families that do not
// exist (hash sets with the given hash size and maximum size, bitmap:port
// sets over every port) and returns the names it created. With every set
// present it only lists the set names.
func EnsureSets(c ipset.Client, families []xtables.Family, hashSize, maxElem uint32) ([]string, error) {
	names, err := c.ListNames()
	if err != nil {
		return nil, fmt.Errorf("dataplane: list ipsets: %w", err)
	}
	have := make(map[string]bool, len(names))
	for _, s := range names {
		have[s] = true
	}
	var created []string
	for _, f := range families {
		for _, name := range rules.Sets(f) {
			if have[name] {
				continue
			}
			if err := createSet(c, f, name, hashSize, maxElem); err != nil {
				return created, err
			}
			created = append(created, name)
		}
	}
	return created, nil
}

// CreateSets creates every kube-proxy ipset of the families unless it
// exists: hash sets with the given hash size and maximum size, bitmap:port
// sets over every port.
func CreateSets(c ipset.Client, families []xtables.Family, hashSize, maxElem uint32) error {
	for _, f := range families {
		for _, name := range rules.Sets(f) {
			if err := createSet(c, f, name, hashSize, maxElem); err != nil {
				return err
			}
		}
	}
	return nil
}

func createSet(c ipset.Client, f xtables.Family, name string, hashSize, maxElem uint32) error {
	s := ipset.Set{Name: name, Type: ipset.Type(rules.SetType(name))}
	if s.Type == ipset.BitmapPort {
		s.PortFrom, s.PortTo = 0, 65535
	} else {
		s.Family, s.HashSize, s.MaxElem = ipset.INET, hashSize, maxElem
		if f == xtables.IPv6 {
			s.Family = ipset.INET6
		}
	}
	if err := c.Create(s, ipset.Exist); err != nil {
		return fmt.Errorf("dataplane: create ipset %s: %w", name, err)
	}
	return nil
}

func (n *Node) timeouts() (bool, error) {
	if n.Cfg.TCPTimeout == 0 && n.Cfg.TCPFinTimeout == 0 && n.Cfg.UDPTimeout == 0 {
		return false, nil
	}
	cur, err := n.Kernel.IPVSConn.Config()
	if err != nil {
		return false, fmt.Errorf("dataplane: read IPVS timeouts: %w", err)
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
		return false, nil
	}
	if err := n.Kernel.IPVSConn.SetConfig(want); err != nil {
		return false, fmt.Errorf("dataplane: set IPVS timeouts: %w", err)
	}
	return true, nil
}

// State is the kernel objects the sink owns, as read at start-up.
type State struct {
	Servers map[render.VirtualServer]render.ServerOptions
	Dests   map[render.Destination]render.DestOptions
	// Bindings are the VIPs made local (addresses on the dummy link, the
	// sinks' local routes); one made local the other way than
	// Kernel.Binding is in BoundOtherWay's form.
	Bindings []netip.Addr
	Entries  []render.SetEntry
	// Visible, when not nil, reports whether the read could see a virtual
	// server (and its destinations) as the sink's: one on an address not
	// bound at the time of the read (its binding failed, or was removed
	// by hand) is not, and its absence from Servers says nothing.
	Visible func(render.VirtualServer) bool `json:"-"`
	// Written holds the objects written (or tried) while the state was
	// being read: what the read shows of them
	// may predate the write, so reconciling neither forgets nor adopts
	// them (Applier.ReadApart).
	Written Written `json:"-"`
}

func excluded(a netip.Addr, cidrs []netip.Prefix) bool {
	for _, p := range cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Owned reports whether a virtual server belongs to the sink: it is
// recorded in the sink's KUBE-PROXYSINKS-VS sets (recorded, which Read
// fills from the kernel), or, for a node adopted from kube-proxy or an
// older sink that recorded nothing, its address is bound on the dummy link
// or it is a node port (node address, port in NodePortRange); and it is
// not in an excluded range. Everything else (keepalived's services,
// another tool's) is never changed or removed.
func (c *NodeConfig) Owned(vs render.VirtualServer, bound map[netip.Addr]bool, recorded map[render.VirtualServer]bool) bool {
	if excluded(vs.Addr, c.ExcludeCIDRs) {
		return false
	}
	if recorded[vs] || bound[vs.Addr] {
		return true
	}
	for _, n := range c.NodeAddresses {
		if n == vs.Addr && vs.Port >= c.NodePortRange[0] && vs.Port <= c.NodePortRange[1] {
			return true
		}
	}
	return false
}

// readBindings lists the dummy link's addresses and the local routes into
// st.Bindings, the ones made local the other way than the binding in use
// in BoundOtherWay's form (to be removed), and returns every address made local
// either way.
func (n *Node) readBindings(st *State) (map[netip.Addr]bool, error) {
	addrs, err := n.Kernel.Link.Addresses(n.Cfg.Dummy)
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return nil, err
	}
	routes, err := n.Kernel.Link.LocalRoutes(RouteLink)
	if err != nil {
		return nil, err
	}
	bound := make(map[netip.Addr]bool, len(addrs)+len(routes))
	add := func(a netip.Addr, routed bool) {
		bound[a] = true
		if excluded(a, n.Cfg.ExcludeCIDRs) {
			return
		}
		if routed != n.Kernel.Binding.routed(a) {
			a = BoundOtherWay(a)
		}
		st.Bindings = append(st.Bindings, a)
	}
	for _, a := range addrs {
		add(a, false)
	}
	for _, a := range routes {
		// Only IPv4 VIPs are ever given routes; an IPv6 route of ours
		// could not be told from an address in BoundOtherWay's form.
		if a.Is4() {
			add(a, true)
		}
	}
	return bound, nil
}

// Read dumps what the sink owns: virtual servers it owns with their
// destinations, the dummy link's addresses, and the entries of its ipsets.
// Sets or the link that do not exist yet are simply empty.
func (n *Node) Read() (*State, error) {
	n.Cfg.defaults()
	st := &State{Servers: map[render.VirtualServer]render.ServerOptions{}, Dests: map[render.Destination]render.DestOptions{}}
	bound, err := n.readBindings(st)
	if err != nil {
		return nil, err
	}
	// The sets first: the records of virtual servers decide ownership.
	recorded := map[render.VirtualServer]bool{}
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
				se := FromEntry(name, e)
				st.Entries = append(st.Entries, se)
				if name == rules.SetName(f, rules.SetVirtualServers) {
					recorded[render.VirtualServer{Protocol: se.Protocol, Addr: se.Addr, Port: se.Port}] = true
				}
			}
		}
	}
	st.Visible = func(vs render.VirtualServer) bool { return n.Cfg.Owned(vs, bound, recorded) }
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
		if !n.Cfg.Owned(vs, bound, recorded) {
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
	return st, nil
}

// HostFamilies returns the IP families the node serves, decided once from
// the host as kube-proxy does: IPv4, and IPv6 unless the host has it off
// (no net/ipv6 sysctls, or net.ipv6.conf.all.disable_ipv6 set). The same
// list must make the node's sets and rules (NodeConfig.Families) and
// decide what is rendered (render.Config.Families), so that no IPv6
// virtual server is programmed without its KUBE-6-* sets and ip6tables
// rules.
func HostFamilies(s kernel.Sysctl) []xtables.Family {
	if v, err := s.Get("net/ipv6/conf/all/disable_ipv6"); err == nil && v == 0 {
		return []xtables.Family{xtables.IPv4, xtables.IPv6}
	}
	return []xtables.Family{xtables.IPv4}
}
