package benchmatrix

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// sinkOrder is the rows' order.
var sinkOrder = func() []string {
	var names []string
	for _, r := range Rows(func(string) string { return "" }, "") {
		names = append(names, r.Name)
	}
	return names
}()

// scenarioOrder is the tables' order.
var scenarioOrder = []string{ScInitial, ScRestart, ScEndpointAdd, ScEndpointRemove, ScServiceAdd, ScServiceRemove, ScOnePercent, ScSteady}

// baseline returns the kube-proxy row a sink is compared with.
func baseline(kind string) string {
	switch kind {
	case KindIPVS:
		return "kube-proxy ipvs"
	case KindIPTables:
		return "kube-proxy iptables"
	case KindNFTables:
		return "kube-proxy nftables"
	}
	return ""
}

type sizeKey struct{ n, m int }

func (k sizeKey) String() string { return fmt.Sprintf("%s x %d", thousands(k.n), k.m) }

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// cell is the samples of one sink, size and scenario.
type cell struct {
	ok     []Sample
	failed []Sample // with Error set, and what they measured before it
}

// straceBound is the most socket message calls strace counted in a cell
// whose strace run timed out: a lower bound of the proxy's (0: none).
func (c *cell) straceBound() float64 {
	var most int64
	for _, s := range c.failed {
		most = max(most, s.MessageSyscalls)
	}
	return float64(most)
}

// table indexes the samples of one size.
type table struct {
	cells map[string]map[string]*cell // sink, scenario
	kinds map[string]string
	runOf map[string]map[string]*Results // sink, scenario: the run of the samples
}

// mergedWith lists the scenarios whose samples a run's sample of scenario
// sc replaces: its own, and the floors and the initial sync together.
func mergedWith(sc string) []string {
	switch sc {
	case ScInitial, ScFloor, ScNFTFloor:
		return []string{ScInitial, ScFloor, ScNFTFloor}
	}
	return []string{sc}
}

// group is the set of proxies whose samples are merged together: the VM's
// (the IPVS proxies), and on the host each kernel back end's (the iptables
// proxies, the nftables ones). A sink is compared only with the kube-proxy
// of its back end, so a run of the nftables proxies alone leaves the
// iptables rows of the same size and scenario to the run that measured
// them.
func group(kind string) string {
	if kind == KindIPVS {
		return "VM"
	}
	return "host " + kind
}

// labels lists the runs a table's rows come from.
func (t *table) labels() string {
	var l []string
	for _, s := range sinkOrder {
		for _, r := range t.runOf[s] {
			if !slices.Contains(l, r.Label) {
				l = append(l, r.Label)
			}
		}
	}
	slices.Sort(l)
	return strings.Join(l, ", ")
}

// label is the run of one sink's samples of scenario sc.
func (t *table) label(sink, sc string) string {
	if r := t.runOf[sink][sc]; r != nil {
		return r.Label
	}
	return "—"
}

// from reports whether any of the table's samples come from run r.
func (t *table) from(r *Results) bool {
	for _, scs := range t.runOf {
		for _, x := range scs {
			if x == r {
				return true
			}
		}
	}
	return false
}

func (t *table) get(sink, sc string) *cell {
	if c := t.cells[sink][sc]; c != nil {
		return c
	}
	return &cell{}
}

func (c *cell) values(f func(Sample) float64) []float64 {
	var v []float64
	for _, s := range c.ok {
		v = append(v, f(s))
	}
	slices.Sort(v)
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

// percentile is the nearest-rank percentile of sorted v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

func seconds(s Sample) float64  { return s.Seconds }
func cpu(s Sample) float64      { return s.CPUSeconds }
func syscalls(s Sample) float64 { return float64(s.Syscalls) }
func messages(s Sample) float64 { return float64(s.MessageSyscalls) }

// merge indexes the samples of runs, oldest first: each size, group of
// proxies (the VM's, each of the host's back ends: group) and scenario
// from the newest run that measured it, so that a sink and the kube-proxy
// it is compared with always come from one run. The IPVS and nf_tables
// floors go with the initial sync they were measured beside. A supplement run's samples go only where no other
// run measured (Results.Supplement).
func merge(runs []*Results) map[sizeKey]*table {
	type part struct {
		size      sizeKey
		group, sc string
	}
	covered := map[part]bool{} // by a run that is no supplement
	for _, r := range runs {
		for _, s := range r.Samples {
			for _, sc := range mergedWith(s.Scenario) {
				if !r.Supplement {
					covered[part{sizeKey{s.Services, s.Endpoints}, group(s.Kind), sc}] = true
				}
			}
		}
	}
	tables := map[sizeKey]*table{}
	for _, r := range runs {
		fresh := map[part]bool{} // replaced by r
		for _, s := range r.Samples {
			k := sizeKey{s.Services, s.Endpoints}
			if r.Supplement && covered[part{k, group(s.Kind), s.Scenario}] {
				continue
			}
			t := tables[k]
			if t == nil {
				t = &table{cells: map[string]map[string]*cell{}, kinds: map[string]string{}, runOf: map[string]map[string]*Results{}}
				tables[k] = t
			}
			g := group(s.Kind)
			for _, sc := range mergedWith(s.Scenario) {
				if p := (part{k, g, sc}); !fresh[p] {
					fresh[p] = true
					for sink, kind := range t.kinds {
						if group(kind) == g {
							delete(t.cells[sink], sc)
							delete(t.runOf[sink], sc)
						}
					}
				}
			}
			if t.cells[s.Sink] == nil {
				t.cells[s.Sink] = map[string]*cell{}
				t.runOf[s.Sink] = map[string]*Results{}
			}
			c := t.cells[s.Sink][s.Scenario]
			if c == nil {
				c = &cell{}
				t.cells[s.Sink][s.Scenario] = c
			}
			t.kinds[s.Sink] = s.Kind
			t.runOf[s.Sink][s.Scenario] = r
			if s.Error != "" {
				c.failed = append(c.failed, s)
			} else {
				c.ok = append(c.ok, s)
			}
		}
	}
	return tables
}
