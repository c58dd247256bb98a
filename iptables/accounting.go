package iptables

import (
	"errors"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// The nfacct objects kube-proxy's iptables mode counts into, and exports
// as kubeproxy_iptables_ct_state_invalid_dropped_packets_total and
// kubeproxy_iptables_localhost_nodeports_accepted_packets_total.
const (
	// AcctInvalidDropped counts the packets KUBE-FORWARD drops as
	// conntrack-INVALID.
	AcctInvalidDropped = "ct_state_invalid_dropped_pkts"
	// AcctLocalhostNodePorts counts the packets to a node port on
	// 127.0.0.0/8 that KUBE-NODEPORTS accepts.
	AcctLocalhostNodePorts = "localhost_nps_accepted_pkts"
)

// Accounting creates nfacct objects (netlinkraw/nfacct.Conn).
type Accounting interface {
	// Ensure creates the object named name unless it exists.
	Ensure(name string) error
}

// nfacctMatch is the match counting into an nfacct object, as
// iptables-save prints it (two spaces before the name).
func nfacctMatch(name string) string { return " -m nfacct --nfacct-name  " + name }

// ensureAccounting ensures kube-proxy's nfacct objects, as kube-proxy does
// at every full sync, and has the rules count into those that exist. A
// change of the localhost one re-renders every service (its node-port
// rules count into it). A failure is logged when it changes: the rules
// do without the objects.
func (p *Proxier) ensureAccounting() {
	if p.cfg.Accounting == nil {
		return
	}
	var errs []error
	ok := func(name string) bool {
		err := p.cfg.Accounting.Ensure(name)
		if err != nil {
			errs = append(errs, err)
		}
		return err == nil
	}
	invalid, localhost := ok(AcctInvalidDropped), ok(AcctLocalhostNodePorts)
	for _, f := range p.fams {
		f.fc.acctInvalid = invalid
		if l := localhost && p.cfg.LocalhostNodePorts && f.fc.fam == xtables.IPv4; l != f.fc.acctLocalhost {
			f.fc.acctLocalhost = l
			f.full, f.rerender, f.from = true, true, nil
		}
	}
	msg := ""
	if err := errors.Join(errs...); err != nil {
		msg = err.Error()
	}
	if msg != p.acctErr && msg != "" {
		p.gen.log.Warn("iptables: nfacct counters missing; their rules count nothing and their metrics are not exported", "error", msg)
	}
	p.acctErr = msg
}
