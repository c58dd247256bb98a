package iptables

import (
	"github.com/proxysinks/proxysinks/client"
)

// The top-level chains a service adds rules to. A service's rules there are
// independent of every other service's (each matches its own addresses and
// ports), so a partial sync edits them rule by rule.
const (
	topNATServices     = iota // nat KUBE-SERVICES
	topNATNodePorts           // nat KUBE-NODEPORTS
	topFilterServices         // filter KUBE-SERVICES
	topFilterExternal         // filter KUBE-EXTERNAL-SERVICES
	topFilterNodePorts        // filter KUBE-NODEPORTS
	topFilterFirewall         // filter KUBE-PROXY-FIREWALL
	numTop
)

// topChains gives each top-level slot its table and chain.
var topChains = [numTop]struct{ table, chain string }{
	{"nat", chainServices},
	{"nat", chainNodePorts},
	{"filter", chainServices},
	{"filter", chainExternalServices},
	{"filter", chainNodePorts},
	{"filter", chainProxyFirewall},
}

// span is one nat chain of a rendered service: its name and its rule lines
// (each ending in a newline) in the service's buffer.
type span struct {
	name       string
	start, end int32
	lines      int32
}

// topSpan is one rule of a rendered service in a top-level chain.
type topSpan struct {
	slot       int32
	start, end int32
}

// rendered is one service's ruleset for one family: its own nat chains and
// its rules in the top-level chains, all in canonical form (canonical.go).
// It is immutable once rendered: full syncs reuse it for a service that
// did not change.
type rendered struct {
	buf    []byte
	chains []span
	tops   []topSpan // in rendering order
	eps    int       // endpoints counted toward large-cluster mode
	lines  int       // rule lines, both tables
	// src and large are what it was rendered from (render is pure).
	src   *client.ServiceEndpoints
	large bool
	// gen is the arena buf, chains and tops were carved from (0: their
	// own allocations); an int32 beside large keeps rendered at 128 bytes.
	gen int32
}

// filterRules counts r's rules in the filter table (its top-level filter
// lines); every other line is a nat rule.
func (r *rendered) filterRules() int {
	n := 0
	for _, s := range r.tops {
		if topChains[s.slot].table == "filter" {
			n++
		}
	}
	return n
}

// topText returns the text of a top-level rule.
func (r *rendered) topText(s topSpan) []byte { return r.buf[s.start:s.end] }

func (r *rendered) text(s span) []byte { return r.buf[s.start:s.end] }

// chainText returns the lines of the named chain and whether r has it.
func (r *rendered) chainText(name string) ([]byte, bool) {
	for _, c := range r.chains {
		if c.name == name {
			return r.text(c), true
		}
	}
	return nil, false
}

// topLines returns the lines r adds to one top-level chain.
func (r *rendered) topLines(slot int) []string {
	var out []string
	for _, s := range r.tops {
		if int(s.slot) == slot {
			out = append(out, string(r.topText(s)))
		}
	}
	return out
}
