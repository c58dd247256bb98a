package ipvssink

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// TestResyncRepairsNode: both IPVS controllers repair the node's drift
// before every resync, and a repair failure reaches the resync's error.
func TestResyncRepairsNode(t *testing.T) {
	errDrift := errors.New("drift")
	for name, mk := range map[string]Make{"fullstate": FullState, "incremental": Incremental} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			d := Deps{Applier: dataplane.NewApplier(dataplane.DryRun{Out: io.Discard}), Render: render.Config{},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Repair: func() ([]string, error) {
					calls++
					if calls == 2 {
						return []string{"link kube-ipvs0"}, errDrift
					}
					return nil, nil
				}}
			ctl := mk(d)
			if st := ctl.Resync(); st.Err != nil || calls != 1 {
				t.Fatalf("first Resync: err %v, %d repairs, want nil and 1", st.Err, calls)
			}
			if st := ctl.Resync(); !errors.Is(st.Err, errDrift) || calls != 2 {
				t.Fatalf("second Resync: err %v, %d repairs, want the repair's error and 2", st.Err, calls)
			}
		})
	}
}
