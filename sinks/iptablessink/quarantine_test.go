package iptablessink

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// refuseB is an iptables that refuses, as iptables-restore does, the
// first line of service default/b in any restore.
type refuseB struct{ on bool }

func (r *refuseB) run(name string, _ []string, stdin []byte) ([]byte, error) {
	if !r.on || !bytes.HasSuffix([]byte(name), []byte("-restore")) {
		return nil, nil
	}
	for i, l := range bytes.Split(stdin, []byte("\n")) {
		if bytes.Contains(l, []byte(`"default/b`)) {
			return nil, fmt.Errorf("iptables-restore: exit status 2: Error occurred at line: %d", i+1)
		}
	}
	return nil, nil
}

// TestQuarantinedService: a service whose rule iptables-restore refuses
// reaches the runtime as a quarantined Service by name, and the sync does
// not fail (health stays good); the controller retries it
// (runtime.Retrier) and reports it gone once written.
func TestQuarantinedService(t *testing.T) {
	r := &refuseB{on: true}
	p, err := iptables.NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, Backend: xtables.NFT, Run: r.run})
	if err != nil {
		t.Fatal(err)
	}
	var synced []runtime.SyncStats
	var ctl runtime.Controller = &Controller{P: p, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSync: func(st runtime.SyncStats) { synced = append(synced, st) }}
	a, b := service("a", "10.96.0.1", "10.244.0.1"), service("b", "10.96.0.2", "10.244.0.2")
	ctl.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{a, b}, nil))
	st := synced[len(synced)-1]
	if st.Err != nil || len(st.Quarantined) != 1 || st.Quarantined[0].Kind != "Service" || st.Quarantined[0].Name != "default/b" ||
		st.Quarantined[0].Service != "b" {
		t.Fatalf("sync with b refused: err %v, quarantined %+v; want Service default/b quarantined and no error", st.Err, st.Quarantined)
	}
	r.on = false
	st = ctl.Resync()
	if st.Err != nil || len(st.Quarantined) != 0 {
		t.Errorf("resync once the refusal ended: err %v, quarantined %+v", st.Err, st.Quarantined)
	}
	if _, ok := ctl.(runtime.Retrier); !ok {
		t.Errorf("the iptables controller does not retry quarantined services")
	}
}
