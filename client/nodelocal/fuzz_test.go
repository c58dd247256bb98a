package nodelocal

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// FuzzCompute decodes a Service and two EndpointSlices from JSON, converts
// them and applies the node-local rules: nothing may panic, a valid result
// is well-formed, it does not depend on slice order, and sharing the
// slices' endpoints (as a State does) gives the same results. Seeds are in
// testdata/fuzz/FuzzCompute.
func FuzzCompute(f *testing.F) {
	f.Fuzz(func(t *testing.T, svcJSON, slice1, slice2 []byte, zone string) {
		var s corev1.Service
		if json.Unmarshal(svcJSON, &s) != nil {
			return
		}
		svc, _, _ := ConvertService(&s, "") // served even with skipped ports
		if svc == nil {
			return
		}
		var sl []*Slice
		for _, raw := range [][]byte{slice1, slice2} {
			var es discoveryv1.EndpointSlice
			if json.Unmarshal(raw, &es) != nil {
				continue
			}
			if p, err := ParseSlice(&es); err == nil && p != nil {
				sl = append(sl, p)
			}
		}
		node := Node{Name: "node-1", Zone: zone}
		se := Compute(svc, sl, node)
		seen := map[string]bool{}
		for i, e := range se.Endpoints {
			if i > 0 && se.Endpoints[i-1].Key >= e.Key {
				t.Fatalf("endpoints not sorted by unique key")
			}
			if e.IPs.Len() == 0 || len(e.IPs.V4) > 1 || len(e.IPs.V6) > 1 {
				t.Fatalf("endpoint %s has addresses %v", e.Key, e.IPs.All())
			}
			for _, a := range e.IPs.All() {
				if seen[a.String()] {
					t.Fatalf("address %s on two endpoints", a)
				}
				seen[a.String()] = true
			}
			if (e.Internal || e.External) && !e.Ready && !(e.Serving && e.Terminating) {
				t.Fatalf("endpoint %s used but neither ready nor serving-terminating", e.Key)
			}
			if e.External && !svc.ExternallyAccessible() {
				t.Fatalf("external flag on a service without external access")
			}
		}
		if len(sl) == 2 {
			if again := Compute(svc, []*Slice{sl[1], sl[0]}, node); !again.Equal(se) {
				t.Fatalf("result depends on slice order")
			}
		}
		// A State's computation, which shares the slice's endpoints when
		// it can, gives the same result, the first time (setting their
		// flags) and again for another node (copying them).
		if shared := compute(svc, sl, node, &scratch{}, true); !shared.Equal(se) {
			t.Fatalf("shared computation differs")
		}
		other := Node{Name: "node-2", Zone: zone + "x"}
		if shared := compute(svc, sl, other, &scratch{}, true); !shared.Equal(Compute(svc, sl, other)) {
			t.Fatalf("shared computation for another node differs")
		}
		if again := compute(svc, sl, node, &scratch{}, true); !again.Equal(se) {
			t.Fatalf("shared computation changed after another node's")
		}
	})
}
