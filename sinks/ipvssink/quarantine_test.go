package ipvssink

import (
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"golang.org/x/sys/unix"
)

// refusing is the fake kernel's writer refusing, as a kernel does, every
// write of one virtual server (EINVAL), and counting the tries.
type refusing struct {
	dataplane.Writer
	addr  netip.Addr
	on    bool
	tries int
}

func (r *refusing) IPVS(ops []ipvs.Op) []error {
	var pass []ipvs.Op
	var at []int
	errs := make([]error, len(ops))
	for i, op := range ops {
		if op.Service.Address == r.addr && op.Kind == ipvs.OpCreateService {
			r.tries++
			if r.on {
				errs[i] = unix.EINVAL
				continue
			}
		}
		pass = append(pass, op)
		at = append(at, i)
	}
	for j, err := range r.Writer.IPVS(pass) {
		errs[at[j]] = err
	}
	return errs
}

// startRefusing starts a sink controller on a fake node whose kernel
// refuses the virtual servers of addr, with the quarantine's clock at
// *now.
func startRefusing(t *testing.T, mk Make, addr netip.Addr, now *time.Time) (*fakeNode, *refusing) {
	n := &fakeNode{Node: dataplanetest.NewNode(t, nil)}
	k := n.Kernel(t)
	n.node = n.Reader(k)
	a := kernelApplier(k)
	r := &refusing{Writer: k, addr: addr, on: true}
	a.W = r
	a.Quarantine.Now = func() time.Time { return *now }
	n.ctl = mk(Deps{Render: render.Config{Scheduler: "rr", Families: n.Families}, Applier: a, Reader: countedReader{n},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OnSync: func(s dataplane.SyncStats) { n.stats = append(n.stats, s) }})
	return n, r
}

// TestQuarantine: a virtual server the kernel refuses is quarantined by
// name while the node's other services are programmed and the sync does
// not fail; it is retried alone, 1 s then 2 s later, not at unrelated
// changes, at once when it changes, and written once the kernel takes it.
func TestQuarantine(t *testing.T) {
	bad := netip.MustParseAddr("10.96.0.1")
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		t.Run(sink.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			want, _ := startRefusing(t, sink.mk, netip.Addr{}, &now)
			n, r := startRefusing(t, sink.mk, bad, &now)
			retry := func() dataplane.SyncStats {
				t.Helper()
				n.ctl.(runtime.Retrier).Retry()
				return n.last()
			}
			svcs := services(0, 4)
			n.ctl.Snapshot(snapshot(svcs))
			st := n.last()
			if st.Err != nil {
				t.Fatalf("sync with one server refused failed: %v", st.Err)
			}
			if len(st.Quarantined) != 1 || st.Quarantined[0].Kind != dataplane.KindVirtualServer || st.Quarantined[0].Name != "TCP/10.96.0.1:80" {
				t.Fatalf("quarantined %+v, want VirtualServer TCP/10.96.0.1:80", st.Quarantined)
			}
			// The rest of the node is programmed: all but the server
			// and its destinations.
			want.ctl.Snapshot(snapshot(svcs))
			rest := slices.DeleteFunc(want.state(t), func(l string) bool {
				return strings.HasSuffix(l, "TCP/10.96.0.1:80 {Weight:1}") ||
					strings.HasPrefix(l, "server TCP/10.96.0.1:80")
			})
			if d := cmp.Diff(rest, n.state(t)); d != "" {
				t.Errorf("kernel besides the refused service -want +got:\n%s", d)
			}
			// An unrelated change, before the retry is due: not retried.
			tries := r.tries
			changed := services(0, 4)
			changed[2].Endpoints = changed[2].Endpoints[:1]
			n.ctl.Snapshot(snapshot(changed))
			if st := n.last(); st.Err != nil || st.Writes == 0 || r.tries != tries {
				t.Errorf("unrelated change: err %v, %d writes, refused server tried %d times; want the change written, the server held",
					st.Err, st.Writes, r.tries-tries)
			}
			if retry(); r.tries != tries {
				t.Errorf("retry before 1 s: tried")
			}
			// Due after 1 s: retried alone (with its two destinations),
			// refused again, next in 2 s.
			now = now.Add(time.Second)
			st = retry()
			if r.tries != tries+1 || st.Writes != 3 {
				t.Errorf("retry at 1 s: %d tries, %d writes; want the server and its destinations alone", r.tries-tries, st.Writes)
			}
			if len(st.Quarantined) != 1 || st.Quarantined[0].Next.Sub(now) != 2*time.Second || st.Quarantined[0].Attempts != 2 {
				t.Errorf("after the second refusal: %+v; want a retry in 2 s", st.Quarantined)
			}
			// The refused service changes: tried at once.
			changed[1].Service.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 60}
			n.ctl.Snapshot(snapshot(changed))
			if r.tries != tries+2 {
				t.Errorf("change of the refused service: %d tries, want it tried at once", r.tries-tries-1)
			}
			// The kernel takes it once the fault clears.
			r.on = false
			now = now.Add(4 * time.Second)
			st = retry()
			if st.Err != nil || len(st.Quarantined) != 0 {
				t.Fatalf("retry after the fault cleared: err %v, quarantined %+v", st.Err, st.Quarantined)
			}
			want.ctl.Snapshot(snapshot(changed))
			if d := cmp.Diff(want.state(t), n.state(t)); d != "" {
				t.Errorf("kernel after the fault cleared -want +got:\n%s", d)
			}
		})
	}
}

// TestWholeFailureNotQuarantined: a batch the kernel answers for no
// object (the socket's receive failed) fails the sync as a whole, as
// before, and quarantines nothing: the health of the node goes with it.
func TestWholeFailureNotQuarantined(t *testing.T) {
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		t.Run(sink.name, func(t *testing.T) {
			n := newFakeNode(t, sink.mk)
			n.IPVS.FailReceives(1, unix.ENOBUFS)
			n.ctl.Snapshot(snapshot(services(0, 4)))
			if st := n.last(); st.Err == nil || len(st.Quarantined) != 0 {
				t.Errorf("whole failure: err %v, quarantined %+v; want the sync failed, nothing quarantined", st.Err, st.Quarantined)
			}
		})
	}
}
