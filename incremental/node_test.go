package incremental

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

var (
	nodeIP4 = netip.MustParseAddr("192.168.1.10")
	nodeIP6 = netip.MustParseAddr("fd00:1::10")
	nodeIPs = []netip.Addr{nodeIP4, nodeIP6}
)

// fakeNode is one fake node (dataplanetest.Node), with a writer that can
// be made to fail chosen objects.
type fakeNode struct {
	*dataplanetest.Node
	fail failing
}

func newFakeNode(t testing.TB) *fakeNode {
	return &fakeNode{Node: dataplanetest.NewNode(t, nil)}
}

// parts returns, as a (re)started process would build them, the applier
// and the reader over the node.
func (n *fakeNode) parts(t testing.TB) (*dataplane.Applier, *dataplane.Node) {
	k := n.Kernel(t)
	n.fail.w = k
	return dataplane.NewApplier(&n.fail), n.Reader(k, nodeIPs...)
}

func (n *fakeNode) failer() *failing        { return &n.fail }
func (n *fakeNode) tools(*testing.T) string { return "" }

func (n *fakeNode) drift(t *testing.T) {
	conn, err := n.IPVS.Conn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	driftOn(t, n.Links, conn)
}

// read returns what the node holds, for comparison.
func read(t testing.TB, nd *dataplane.Node) *dataplane.State {
	t.Helper()
	st, err := nd.Read()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(st.Bindings, netip.Addr.Compare)
	slices.SortFunc(st.Entries, func(a, b render.SetEntry) int { return cmpString(a.String(), b.String()) })
	return st
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// failing is a dataplane.Writer that fails the writes whose description
// fail selects (by object, so two sinks writing the same objects fail the
// same ones) and passes the others to w.
type failing struct {
	w    dataplane.Writer
	pick func(what string) bool
}

var errInjected = errors.New("injected failure")

func (f *failing) IPVS(ops []ipvs.Op) []error {
	errs := make([]error, len(ops))
	var pass []ipvs.Op
	var at []int
	for i, op := range ops {
		if f.pick != nil && f.pick("ipvs "+op.String()+fmt.Sprint(op.Destination.Weight, op.Service.Scheduler)) {
			errs[i] = fmt.Errorf("ipvs %s: %w", op, errInjected)
			continue
		}
		pass = append(pass, op)
		at = append(at, i)
	}
	if len(pass) > 0 {
		for j, err := range f.w.IPVS(pass) {
			errs[at[j]] = err
		}
	}
	return errs
}

func (f *failing) entries(op, set string, es []ipset.Entry, write func(string, []ipset.Entry) []error) []error {
	errs := make([]error, len(es))
	var pass []ipset.Entry
	var at []int
	for i, e := range es {
		if f.pick != nil && f.pick(op+" "+set+" "+e.String()) {
			errs[i] = fmt.Errorf("ipset %s %s %s: %w", op, set, e, errInjected)
			continue
		}
		pass = append(pass, e)
		at = append(at, i)
	}
	if len(pass) > 0 {
		for j, err := range write(set, pass) {
			errs[at[j]] = err
		}
	}
	return errs
}

func (f *failing) AddEntries(set string, es []ipset.Entry) []error {
	return f.entries("add", set, es, f.w.AddEntries)
}

func (f *failing) DelEntries(set string, es []ipset.Entry) []error {
	return f.entries("del", set, es, f.w.DelEntries)
}

func (f *failing) addrs(op string, as []netip.Addr, write func([]netip.Addr) []error) []error {
	errs := make([]error, len(as))
	var pass []netip.Addr
	var at []int
	for i, a := range as {
		if f.pick != nil && f.pick(op+" "+a.String()) {
			errs[i] = fmt.Errorf("%s %s: %w", op, a, errInjected)
			continue
		}
		pass = append(pass, a)
		at = append(at, i)
	}
	if len(pass) > 0 {
		for j, err := range write(pass) {
			errs[at[j]] = err
		}
	}
	return errs
}

func (f *failing) Bind(as []netip.Addr) []error   { return f.addrs("bind", as, f.w.Bind) }
func (f *failing) Unbind(as []netip.Addr) []error { return f.addrs("unbind", as, f.w.Unbind) }

func (f *failing) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return f.w.Destinations(s)
}

// pickOneIn returns a choice of about one object in n, that depends on
// seed and on the object only.
func pickOneIn(seed uint64, n uint32) func(string) bool {
	return func(what string) bool {
		h := fnv.New32a()
		fmt.Fprint(h, seed, what)
		return h.Sum32()%n == 0
	}
}

// wantState renders every service as a sink should program it on an empty
// node: the oracle for steps without failures.
func wantState(ses []*client.ServiceEndpoints, cfg render.Config) *dataplane.State {
	c := &stateSink{st: &dataplane.State{Servers: map[render.VirtualServer]render.ServerOptions{}, Dests: map[render.Destination]render.DestOptions{}}, bound: map[netip.Addr]bool{}, entries: map[render.SetEntry]bool{}}
	for _, se := range ses {
		render.Render(se, cfg, c)
	}
	// What the sinks cannot read back as theirs (neither recorded in
	// KUBE-PROXYSINKS-VS nor inferred) is left out, as Node.Read leaves
	// it out.
	nc := dataplane.NodeConfig{NodeAddresses: cfg.NodeAddresses, NodePortRange: [2]uint16{30000, 32767}}
	recorded := map[render.VirtualServer]bool{}
	for e := range c.entries {
		if e.Set == rules.SetVirtualServers || e.Set == rules.SetName(xtables.IPv6, rules.SetVirtualServers) {
			recorded[render.VirtualServer{Protocol: e.Protocol, Addr: e.Addr, Port: e.Port}] = true
		}
	}
	for vs := range c.st.Servers {
		if !nc.Owned(vs, c.bound, recorded) {
			delete(c.st.Servers, vs)
		}
	}
	for d := range c.st.Dests {
		if !nc.Owned(d.Server, c.bound, recorded) {
			delete(c.st.Dests, d)
		}
	}
	for a := range c.bound {
		c.st.Bindings = append(c.st.Bindings, a)
	}
	for e := range c.entries {
		c.st.Entries = append(c.st.Entries, e)
	}
	slices.SortFunc(c.st.Bindings, netip.Addr.Compare)
	slices.SortFunc(c.st.Entries, func(a, b render.SetEntry) int { return cmpString(a.String(), b.String()) })
	return c.st
}

type stateSink struct {
	st      *dataplane.State
	bound   map[netip.Addr]bool
	entries map[render.SetEntry]bool
}

func (s *stateSink) Server(vs render.VirtualServer, o render.ServerOptions) { s.st.Servers[vs] = o }
func (s *stateSink) Destination(d render.Destination, o render.DestOptions) {
	s.st.Dests[d] = o
}
func (s *stateSink) Bind(a netip.Addr)       { s.bound[a] = true }
func (s *stateSink) Entry(e render.SetEntry) { s.entries[e] = true }

// stateDiff compares two kernel states.
func stateDiff(want, got *dataplane.State) string {
	return cmp.Diff(want, got, cmpopts.IgnoreFields(dataplane.State{}, "Visible"), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }))
}
