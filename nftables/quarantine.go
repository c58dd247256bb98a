package nftables

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// An nf_tables transaction is all or nothing: one object the kernel
// refuses fails every service's changes with it. So when every operation
// the kernel refused belongs to a service (a chain of the service, named
// after it, a rule of such a chain, an affinity set, or an element whose
// comment or verdict names the service), those services are quarantined
// and the family is planned again with each of them held: rendered from
// the version the table last received (family.wrote), so that the kernel
// keeps what it has of them, or left out when the table never received
// one. The rest is committed. A held service is retried alone with
// backoff (Retry, or the next sync once its retry is due), at once when
// it changes, and every one on Resync; it leaves quarantine once written.
// A refusal that belongs to no service (a base chain, a shared set, the
// table) fails the family's sync as a whole, as does one of more than
// maxRefusals services.
//
// Holding works on the snapshot, before rendering: the renderer, its
// Delta and the full plan all see the held snapshot, so the delta path
// stays exact while services are quarantined.

// KindService is the quarantine.Object.Kind of a refused service.
const KindService = "Service"

// maxRefusals bounds the services one sync quarantines (and the plans it
// makes again) before it fails as a whole.
const maxRefusals = 16

// qkey is a service of one family in the quarantine.
type qkey struct {
	v6  bool
	svc client.ServiceKey
}

// object names a service of a family for the quarantine, as the iptables
// sink names its services.
func object(v6 bool, k client.ServiceKey) quarantine.Object {
	name := k.String()
	if v6 {
		name += " (IPv6)"
	}
	return quarantine.Object{Kind: KindService, Name: name, Namespace: k.Namespace, Service: k.Name}
}

// refusedError is a commit refused by the kernel whose refused
// operations all belong to the services svcs.
type refusedError struct {
	svcs []client.ServiceKey
	err  error
}

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// quarantined returns the Proxier's quarantine, made on first use.
func (p *Proxier) quarantined() *quarantine.Set[qkey] {
	if p.q == nil {
		p.q = quarantine.New[qkey](quarantine.DefaultMin, p.cfg.SyncPeriod)
	}
	return p.q
}

// held returns the snapshot to render for family f: s with each service
// the quarantine holds (refused in this sync, or not due and unchanged
// outside a Resync) in the version the table last received, or without
// it when the table never received one.
func (p *Proxier) held(f *family, s *client.Snapshot) *client.Snapshot {
	q := p.quarantined()
	if q.Len() == 0 {
		return s
	}
	v6 := f.fam == nft.FamilyIPv6
	subst := map[client.ServiceKey]*client.ServiceEndpoints{}
	q.Keep(func(k qkey) bool {
		if k.v6 != v6 {
			return true
		}
		se := s.Lookup(k.svc)
		if !p.failedNow[k] && (p.retryAll || !q.Hold(k, se)) {
			return true
		}
		var old *client.ServiceEndpoints
		if f.wrote != nil {
			old = f.wrote.Lookup(k.svc)
		}
		if old != se {
			subst[k.svc] = old
		}
		return true
	})
	if len(subst) == 0 {
		return s
	}
	out := make([]*client.ServiceEndpoints, 0, s.Len()+len(subst))
	for se := range s.All() {
		k := se.Service.Key()
		old, ok := subst[k]
		if !ok {
			out = append(out, se)
			continue
		}
		delete(subst, k)
		if old != nil {
			out = append(out, old)
		}
	}
	// Services gone from s whose deletion was refused: kept.
	for _, old := range subst {
		if old != nil {
			out = append(out, old)
		}
	}
	slices.SortFunc(out, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	hs := client.NewSnapshot(out, nil)
	hs.Full, hs.Node, hs.ServiceCIDRs = s.Full, s.Node, s.ServiceCIDRs
	return hs
}

// settle records that family f's table now holds hs, rendered for s:
// the services written as s has them, or gone from both, leave the
// quarantine.
func (p *Proxier) settle(f *family, s, hs *client.Snapshot) {
	f.wrote = hs
	q := p.quarantined()
	if q.Len() == 0 {
		return
	}
	v6 := f.fam == nft.FamilyIPv6
	q.Keep(func(k qkey) bool {
		if k.v6 != v6 {
			return true
		}
		want, got := s.Lookup(k.svc), hs.Lookup(k.svc)
		return !(want == got || want != nil && got != nil && want.Equal(got))
	})
}

// refuse quarantines the services of a refused commit (re) of family f,
// wanted as s has them. It returns false, quarantining nothing, when one
// of them is not a service of s nor of the table, was already refused
// in this sync (holding it changed nothing), or the sync reached
// maxRefusals.
func (p *Proxier) refuse(f *family, s *client.Snapshot, re *refusedError) bool {
	v6 := f.fam == nft.FamilyIPv6
	for _, k := range re.svcs {
		known := s.Lookup(k) != nil || f.wrote != nil && f.wrote.Lookup(k) != nil
		if !known || p.failedNow[qkey{v6, k}] {
			return false
		}
	}
	if len(p.failedNow)+len(re.svcs) > maxRefusals {
		return false
	}
	if p.failedNow == nil {
		p.failedNow = map[qkey]bool{}
	}
	for _, k := range re.svcs {
		key := qkey{v6, k}
		p.failedNow[key] = true
		p.quarantined().Fail(key, object(v6, k), s.Lookup(k), fmt.Errorf("nftables: service %s: %w", k, re.err))
	}
	return true
}

// Quarantined returns the services the kernel refused, retried with
// backoff.
func (p *Proxier) Quarantined() []quarantine.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quarantined().Entries()
}

// Retry writes the quarantined services whose retry is due, from the
// last snapshot: the others stay held, so that the transaction carries
// only their changes (and anything a failed sync left to write).
func (p *Proxier) Retry() (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil || p.quarantined().Len() == 0 {
		return SyncStats{}, nil
	}
	return p.sync(p.last, false)
}

// refusedServices maps the operations a refused commit of ops names to
// their services: false when the error is not a refusal, or one refused
// operation belongs to no service. cur is the table's state before ops,
// next the one after them; s the snapshot rendered.
func refusedServices(err error, ops []op, cur, next *applied, s *client.Snapshot) ([]client.ServiceKey, bool) {
	var ce *nft.CommitError
	if errors.Is(err, errStale) || errors.Is(err, errUnknown) || !errors.As(err, &ce) || len(ce.Failed) == 0 {
		return nil, false
	}
	var out []client.ServiceKey
	for _, oe := range ce.Failed {
		o := opAt(ops, oe.Index)
		if o == nil || o.label != oe.Label {
			return nil, false
		}
		k, ok := o.service(oe.Elem, cur, next, s)
		if !ok {
			return nil, false
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, true
}

// opAt returns the operation of ops that made the transaction's i-th
// operation: encode makes one of each, and of a rule one more for each
// anonymous set it creates and one for its elements.
func opAt(ops []op, i int) *op {
	n := 0
	for j := range ops {
		m := 1
		if o := &ops[j]; o.kind == opAddRule {
			for _, a := range o.rule.anon {
				m++
				if len(a.elems) > 0 {
					m++
				}
			}
		}
		if i < n+m {
			return &ops[j]
		}
		n += m
	}
	return nil
}

// service returns the service o's object belongs to; elem is the index
// of the refused element of an element operation (-1: not known).
func (o *op) service(elem int, cur, next *applied, s *client.Snapshot) (client.ServiceKey, bool) {
	switch o.kind {
	case opAddChain:
		return chainService(o.chain.Name)
	case opFlushChain, opDelChain, opAddRule:
		return chainService(o.name)
	case opAddSet:
		return setService(o.set.Name)
	case opDelSet:
		return setService(o.name)
	case opAddElems, opDelElems:
		if elem < 0 || elem >= len(o.elems) {
			return client.ServiceKey{}, false
		}
		in := next
		if o.kind == opDelElems {
			in = cur
		}
		e, ok := in.element(o.name, &o.elems[elem])
		if !ok {
			return client.ServiceKey{}, false
		}
		return elementService(o.name, e, s)
	}
	return client.ServiceKey{}, false
}

// element returns the element of set name whose compiled form has k's
// key.
func (a *applied) element(name string, k *nft.Elem) (ruleset.Element, bool) {
	i, ok := slices.BinarySearchFunc(a.sets, name, func(s appliedSet, n string) int { return strings.Compare(s.def.Name, n) })
	if !ok {
		return ruleset.Element{}, false
	}
	as := &a.sets[i]
	for j, c := range as.elems {
		if elemKey(c) == elemKey(k) && j < len(as.def.Elements) {
			return as.def.Elements[j], true
		}
	}
	return ruleset.Element{}, false
}

// The prefixes of chains and sets named after a service port (package
// ruleset's names: prefix, an 8-character hash, a dash, then
// "namespace/name/protocol/port", and for an endpoint's "__ip/port").
var (
	serviceChainPrefixes = []string{"service-", "local-", "external-", "firewall-", "endpoint-"}
	serviceSetPrefixes   = []string{"affinity-"}
)

// chainService returns the service a chain is named after.
func chainService(name string) (client.ServiceKey, bool) {
	return nameService(name, serviceChainPrefixes)
}

// setService returns the service a set is named after.
func setService(name string) (client.ServiceKey, bool) { return nameService(name, serviceSetPrefixes) }

func nameService(name string, prefixes []string) (client.ServiceKey, bool) {
	for _, pre := range prefixes {
		rest, ok := strings.CutPrefix(name, pre)
		if !ok || len(rest) < 10 || rest[8] != '-' || strings.IndexFunc(rest[:8], notBase32) >= 0 {
			continue
		}
		parts := strings.SplitN(rest[9:], "/", 3)
		if len(parts) == 3 && parts[0] != "" && parts[1] != "" {
			return client.ServiceKey{Namespace: parts[0], Name: parts[1]}, true
		}
	}
	return client.ServiceKey{}, false
}

func notBase32(r rune) bool { return (r < 'A' || r > 'Z') && (r < '2' || r > '7') }

// elementService returns the service an element of set belongs to: the
// chain its verdict goes to, else its comment (kube-proxy's service port
// name, "namespace/name:port"), else, in cluster-ips, the service of
// that cluster IP in s.
func elementService(set string, e ruleset.Element, s *client.Snapshot) (client.ServiceKey, bool) {
	for _, verb := range []string{"goto ", "jump "} {
		if chain, ok := strings.CutPrefix(e.Value, verb); ok {
			if k, ok := chainService(chain); ok {
				return k, true
			}
		}
	}
	if ns, rest, ok := strings.Cut(e.Comment, "/"); ok && ns != "" {
		name, _, _ := strings.Cut(rest, ":")
		if name != "" {
			return client.ServiceKey{Namespace: ns, Name: name}, true
		}
	}
	if set == "cluster-ips" && s != nil {
		for se := range s.All() {
			for _, ip := range se.Service.ClusterIPs.All() {
				if ip.String() == e.Key {
					return se.Service.Key(), true
				}
			}
		}
	}
	return client.ServiceKey{}, false
}
