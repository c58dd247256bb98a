package controller

import (
	"bytes"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/diffstore"
	"github.com/proxysinks/proxysinks/dataplane/objects"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

type failingReader struct{}

func (failingReader) Read() (*dataplane.State, error) { return nil, errors.New("no kernel") }

// TestRoundLogLevels: one log policy for both controllers: a round that
// wrote logs at Info, one that wrote nothing at Debug, one whose read
// failed at Error (and writes nothing); a resync before the first sync
// is the controller's own.
func TestRoundLogLevels(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	bindings := diffstore.NewComparable[objects.AddrKey, struct{}]()
	var c Core
	c.Init(dataplane.NewApplier(dataplanetest.NewNode(t, nil).Kernel(t)), nil, log, Records{
		Servers:  Diffstore[objects.ServerKey, render.ServerOptions]{diffstore.NewComparable[objects.ServerKey, render.ServerOptions]()},
		Dests:    Diffstore[objects.DestKey, render.DestOptions]{diffstore.NewComparable[objects.DestKey, render.DestOptions]()},
		Bindings: Diffstore[objects.AddrKey, struct{}]{bindings},
		Entries:  Diffstore[objects.EntryKey, struct{}]{diffstore.NewComparable[objects.EntryKey, struct{}]()},
	})
	var reported []dataplane.SyncStats
	c.OnSync = func(st dataplane.SyncStats) { reported = append(reported, st) }
	decide := func() Counts {
		bindings.Reset()
		bindings.Set(c.Keys.Addr(netip.MustParseAddr("10.96.0.1")), struct{}{})
		bindings.Done()
		return Counts{Services: 1}
	}
	if st := c.Resync(func() dataplane.SyncStats { return dataplane.SyncStats{Services: -1} }, decide); st.Services != -1 {
		t.Errorf("a resync before the first sync is not the controller's first: %+v", st)
	}
	c.Sync(decide)
	c.Sync(decide)
	c.Reader = failingReader{}
	c.Resync(nil, decide)
	var levels []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(l)
		levels = append(levels, f[1]+" "+f[2])
	}
	want := []string{"level=INFO msg=sync", "level=DEBUG msg=sync", `level=ERROR msg="resync`}
	if diff := cmp.Diff(want, levels); diff != "" {
		t.Errorf("log lines (-want +got):\n%s\n%s", diff, out.String())
	}
	if len(reported) != 3 || reported[0].Writes != 1 || reported[1].Writes != 0 || reported[2].Err == nil {
		t.Errorf("reported %+v", reported)
	}
}
