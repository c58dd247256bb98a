package nftablessink

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// refusingProxier is a Proxier whose kernel refuses service default/b
// (what nftables.Proxier reports then, as its kernel tests show: the sync
// does not fail, the service is quarantined) until on is false; a retry
// or a resync then writes it.
type refusingProxier struct {
	on      bool
	q       []quarantine.Entry
	retries int
}

func (p *refusingProxier) Snapshot(s *client.Snapshot) (nftables.SyncStats, error) {
	if p.on && s.Lookup(client.ServiceKey{Namespace: "default", Name: "b"}) != nil {
		p.q = []quarantine.Entry{{Object: quarantine.Object{Kind: nftables.KindService, Name: "default/b", Namespace: "default", Service: "b"},
			Err: errors.New("refused"), Attempts: 1, Next: time.Now().Add(time.Second)}}
		return nftables.SyncStats{Transactions: 1, Failures: 1}, nil
	}
	return nftables.SyncStats{Transactions: 1}, nil
}

func (p *refusingProxier) Resync() (nftables.SyncStats, error) { return p.write() }
func (p *refusingProxier) Retry() (nftables.SyncStats, error) {
	p.retries++
	return p.write()
}

func (p *refusingProxier) write() (nftables.SyncStats, error) {
	if !p.on {
		p.q = nil
	}
	return nftables.SyncStats{Transactions: 1}, nil
}

func (p *refusingProxier) Quarantined() []quarantine.Entry           { return p.q }
func (p *refusingProxier) SetLocal(xtables.LocalTraffic)             {}
func (p *refusingProxier) SetNodePorts([]netip.Prefix, []netip.Addr) {}

// TestQuarantinedService: a service whose objects the kernel refused
// reaches the runtime as a quarantined Service by name, and the sync does
// not fail (health stays good); the controller retries it
// (runtime.Retrier) and reports it gone once written.
func TestQuarantinedService(t *testing.T) {
	p := &refusingProxier{on: true}
	var synced []runtime.SyncStats
	var ctl runtime.Controller = &Controller{P: p, Log: discard(), OnSync: func(st runtime.SyncStats) { synced = append(synced, st) }}
	a, b := service("a", "10.96.0.1", "10.244.0.1"), service("b", "10.96.0.2", "10.244.0.2")
	ctl.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{a, b}, nil))
	st := synced[len(synced)-1]
	want := []quarantine.Entry{{Object: quarantine.Object{Kind: "Service", Name: "default/b", Namespace: "default", Service: "b"}, Attempts: 1}}
	if diff := cmp.Diff(want, st.Quarantined, cmpopts.IgnoreFields(quarantine.Entry{}, "Err", "Next"), cmpopts.EquateComparable(netip.Addr{})); diff != "" || st.Err != nil || st.Failed != 1 {
		t.Fatalf("sync with b refused: err %v, failed %d, quarantined (-want +got):\n%s", st.Err, st.Failed, diff)
	}
	r, ok := ctl.(runtime.Retrier)
	if !ok {
		t.Fatalf("the nftables controller does not retry quarantined services")
	}
	if st := r.Retry(); p.retries != 1 || st.Err != nil || len(st.Quarantined) != 1 {
		t.Errorf("retry while refused: %d retries, err %v, quarantined %+v", p.retries, st.Err, st.Quarantined)
	}
	p.on = false
	if st := ctl.Resync(); st.Err != nil || len(st.Quarantined) != 0 {
		t.Errorf("resync once the refusal ended: err %v, quarantined %+v", st.Err, st.Quarantined)
	}
}
