package dataplane

import (
	"errors"
	"fmt"
	"slices"

	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"golang.org/x/sys/unix"
)

// Cleanup removes what an IPVS sink, or kube-proxy's IPVS mode, programs
// on the node, as `kube-proxy --cleanup` does: the virtual servers the
// sink owns (recorded in its ownership sets, or inferred as for a node
// kube-proxy ran; Read decides) with their destinations, the iptables
// jumps and KUBE-* chains of its rulesets, its KUBE-* ipsets, its local
// routes (BindRoutes) and the dummy link with its addresses. Foreign
// virtual servers, sets, chains and rules stay; what is already gone is
// not an error. It returns what it removed,
// one short description each; a piece that fails does not stop the
// others.
func (n *Node) Cleanup() ([]string, error) {
	n.Cfg.defaults()
	var removed []string
	var errs []error
	// The servers first: their records are in the sets removed below.
	st, err := n.Read()
	if err != nil {
		return nil, fmt.Errorf("cleanup: read what the sink owns: %w", err)
	}
	servers := make([]Server, 0, len(st.Servers))
	for vs, o := range st.Servers {
		servers = append(servers, Server{VS: vs, Opts: o})
	}
	slices.SortFunc(servers, func(a, b Server) int { return cmpVS(a.VS, b.VS) })
	if len(servers) > 0 {
		res := NewApplier(n.Kernel).Apply(Plan{DeleteServers: servers})
		if err := res.Err(); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
		removed = append(removed, fmt.Sprintf("%d virtual servers", len(servers)-res.Failed.Len()))
	}
	// The rules before the sets: a set a rule refers to cannot be destroyed.
	run := n.RulesRunner
	if run == nil {
		run = xtables.Exec
	}
	for _, f := range n.Cfg.Families {
		b, err := xtables.Detect(f, run)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
			continue
		}
		in := &rules.Installer{Backend: b, Run: run}
		if err := in.Remove(rules.Build(n.Cfg.Rules, f)); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
			continue
		}
		removed = append(removed, fmt.Sprintf("iptables rules (%s, %s)", f, b))
	}
	for _, f := range n.Cfg.Families {
		for _, name := range rules.Sets(f) {
			if _, err := n.Kernel.IPSet.Header(name); ipset.IsNotExist(err) {
				continue
			}
			if err := n.Kernel.IPSet.Destroy(name, ipset.Exist); err != nil {
				errs = append(errs, fmt.Errorf("cleanup: destroy ipset %s: %w", name, err))
				continue
			}
			removed = append(removed, "ipset "+name)
		}
	}
	if routes, err := n.Kernel.Link.LocalRoutes(RouteLink); err != nil {
		errs = append(errs, fmt.Errorf("cleanup: %w", err))
	} else if len(routes) > 0 {
		if err := n.Kernel.Link.DelLocalRoutes(RouteLink, routes); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		} else {
			removed = append(removed, fmt.Sprintf("%d local routes", len(routes)))
		}
	}
	if _, err := n.Kernel.Link.Addresses(n.Cfg.Dummy); !errors.Is(err, unix.ENODEV) {
		if err := n.Kernel.Link.DeleteLink(n.Cfg.Dummy); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		} else {
			removed = append(removed, "link "+n.Cfg.Dummy)
		}
	}
	return removed, errors.Join(errs...)
}
