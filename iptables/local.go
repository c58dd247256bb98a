package iptables

import "github.com/proxysinks/proxysinks/host/xtables"

// setLocal sets the family's local-traffic detection; the text of its
// prefix is cached anew.
func (fc *famConfig) setLocal(l xtables.LocalTraffic) {
	fc.localCIDR, _ = l.Source(fc.fam)
	fc.localIn = l.Interface
	if fc.scratch != nil {
		fc.scratch.cidr = ""
	}
}
