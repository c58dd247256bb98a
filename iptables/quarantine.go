package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// An iptables-restore transaction is all or nothing: one rule it refuses
// fails every service's changes with it. So when a restore fails at a line
// of one service's rules (iptables-restore names the line), that service
// is quarantined and the sync runs again without its new rules: it keeps
// the rules the kernel has for it (those last written), and the rest of
// the node converges. Keeping them, not removing them, is what keeps
// traffic safest: its clients keep reaching the endpoints they reached
// (kube-proxy-like graceful degradation, as for a service that cannot be
// rendered), instead of losing the service over one bad value. The
// service is retried alone (Proxier.Retry) with backoff, or at once when
// it changes. A failure at a line that belongs to no service (COMMIT of
// the legacy backend, which refuses at commit time; a base chain) fails
// the sync as a whole, as before.

// KindService is the quarantine.Object.Kind of a refused service.
const KindService = "Service"

// maxRefusals bounds the services one full sync quarantines before it
// fails as a whole.
const maxRefusals = 16

// qkey is a service of one family in the quarantine.
type qkey struct {
	fam xtables.Family
	svc client.ServiceKey
}

// object names a service of family fam for the quarantine.
func object(fam xtables.Family, k client.ServiceKey) quarantine.Object {
	name := k.String()
	if fam == xtables.IPv6 {
		name += " (IPv6)"
	}
	return quarantine.Object{Kind: KindService, Name: name, Namespace: k.Namespace, Service: k.Name}
}

// failedLine finds, in iptables-restore's error, the input line it
// failed at: "Error occurred at line: N" (a rule it could not parse),
// "line N: RULE_APPEND failed" (nft: the kernel refused the rule),
// "line N failed" (legacy: the commit failed).
var failedLine = regexp.MustCompile(`Error occurred at line: (\d+)|line (\d+)(?::| failed)`)

// refusedLine returns the 1-based input line err names.
func refusedLine(err error) (int, bool) {
	m := failedLine.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1] + m[2])
	return n, n > 0
}

// lineAt returns input's n-th line (1-based), without its newline.
func lineAt(input []byte, n int) []byte {
	for i := 1; len(input) > 0; i++ {
		line, rest, _ := bytes.Cut(input, []byte("\n"))
		if i == n {
			return line
		}
		input = rest
	}
	return nil
}

// owns reports whether r's rendering has line: a declaration of one of
// its chains, or one of its rules (as "-A", or the "-I CHAIN 1" and
// "-D" forms of a partial sync).
func (r *rendered) owns(line []byte) bool {
	if name, ok := bytes.CutPrefix(line, []byte(":")); ok {
		chain, _, _ := bytes.Cut(name, []byte(" "))
		_, has := r.chainText(string(chain))
		return has
	}
	rule := line
	switch {
	case bytes.HasPrefix(line, []byte("-D ")):
		rule = append([]byte("-A "), line[3:]...)
	case bytes.HasPrefix(line, []byte("-I ")):
		chain, rest, _ := bytes.Cut(line[3:], []byte(" "))
		rest = bytes.TrimPrefix(rest, []byte("1 "))
		rule = append(append(append([]byte("-A "), chain...), ' '), rest...)
	case !bytes.HasPrefix(line, []byte("-A ")):
		return false
	}
	buf := r.buf
	for len(buf) > 0 {
		l, rest, _ := bytes.Cut(buf, []byte("\n"))
		if bytes.Equal(l, rule) {
			return true
		}
		buf = rest
	}
	return false
}

// refused returns the service, among rs, whose rule or chain the failed
// restore of input (err) names.
func refused(err error, input []byte, rs []*rendered) (client.ServiceKey, bool) {
	n, ok := refusedLine(err)
	if !ok {
		return client.ServiceKey{}, false
	}
	line := lineAt(input, n)
	if len(line) == 0 {
		return client.ServiceKey{}, false
	}
	for _, r := range rs {
		if r != nil && r.src != nil && r.src.Service != nil && r.owns(line) {
			return r.src.Service.Key(), true
		}
	}
	return client.ServiceKey{}, false
}

// hold replaces, in a full sync's renderings, those of the services whose
// quarantine holds them (not due, unchanged) by what the kernel has of
// them (substitute).
func (p *Proxier) hold(f *family, list []*rendered, svcs map[client.ServiceKey]*rendered, eps *int) []*rendered {
	if p.q.Len() == 0 || p.retryAll {
		return list
	}
	for k, r := range svcs {
		if p.q.Hold(qkey{f.fc.fam, k}, r.src) {
			list = f.substitute(k, list, svcs, eps)
		}
	}
	return list
}

// substitute puts, in place of k's new rendering, the one last written
// (the kernel's), or none for a service never written.
func (f *family) substitute(k client.ServiceKey, list []*rendered, svcs map[client.ServiceKey]*rendered, eps *int) []*rendered {
	cur := svcs[k]
	old := f.svcs[k]
	if cur == nil || cur == old {
		return list
	}
	*eps -= cur.eps
	out := list[:0]
	for _, r := range list {
		switch {
		case r != cur:
			out = append(out, r)
		case old != nil:
			out = append(out, old)
		}
	}
	if old != nil {
		svcs[k] = old
		*eps += old.eps
	} else {
		delete(svcs, k)
	}
	return out
}

// settle records a full sync's outcome in the quarantine: services
// written with the snapshot's rendering leave it, and so do those no
// longer in the snapshot. It returns whether any service of the family
// stays quarantined.
func (p *Proxier) settle(f *family, s *client.Snapshot, svcs map[client.ServiceKey]*rendered) bool {
	if p.q.Len() == 0 {
		return false
	}
	left := false
	p.q.Keep(func(k qkey) bool {
		if k.fam != f.fc.fam {
			return true
		}
		se := s.Lookup(k.svc)
		if se == nil {
			return false
		}
		if r := svcs[k.svc]; r != nil && (r.src == se || r.src.Equal(se)) {
			return false // written as wanted
		}
		left = true
		return true
	})
	return left
}

// Quarantined returns the services the kernel refused, retried with
// backoff.
func (p *Proxier) Quarantined() []quarantine.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.Entries()
}

// Retry writes, each alone, the quarantined services whose retry is due:
// one partial transaction per service, from the last snapshot. A family
// whose next sync must be full is left to it.
func (p *Proxier) Retry() (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var st SyncStats
	if p.last == nil {
		return st, nil
	}
	var errs []error
	for _, k := range p.q.Due() {
		f := p.familyOf(k.fam)
		if f == nil || f.full {
			continue
		}
		se := p.last.Lookup(k.svc)
		if se == nil {
			p.q.Clear(k)
			continue
		}
		ch := partialChange{key: k.svc, old: f.svcs[k.svc], new: &rendered{}}
		if err := render(&f.fc, se, f.large, ch.new); err != nil {
			errs = append(errs, err)
			continue
		}
		t := &txn{}
		ch.write(t)
		ch.deleteChains(t)
		if err := p.restore(f, t, &st, true); err != nil {
			p.q.Fail(k, object(k.fam, k.svc), se, fmt.Errorf("iptables: service %s: %w", k.svc, err))
			// A transaction of two tables may have committed one: a
			// full sync (which holds the service now) puts the
			// family back in order.
			fs, err := p.syncFull(f, p.last)
			st.add(fs)
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if ch.old != nil {
			f.eps -= ch.old.eps
		}
		f.eps += ch.new.eps
		f.svcs[k.svc] = ch.new
		f.from = nil
		p.q.Clear(k)
	}
	return st, errors.Join(errs...)
}

// familyOf returns the Proxier's family fam, or nil.
func (p *Proxier) familyOf(fam xtables.Family) *family {
	for _, f := range p.fams {
		if f.fc.fam == fam {
			return f
		}
	}
	return nil
}

// refuse quarantines the service whose rule the failed restore (err) of
// the Proxier's last input names, among rs, and returns it; false when
// the failure is no one service's.
func (p *Proxier) refuse(f *family, err error, rs []*rendered) (client.ServiceKey, bool) {
	k, ok := refused(err, p.scratch, rs)
	if !ok {
		return k, false
	}
	var se *client.ServiceEndpoints
	for _, r := range rs {
		if r != nil && r.src != nil && r.src.Service != nil && r.src.Service.Key() == k {
			se = r.src
			break
		}
	}
	p.q.Fail(qkey{f.fc.fam, k}, object(f.fc.fam, k), se, fmt.Errorf("iptables: service %s: %w", k, err))
	return k, true
}
