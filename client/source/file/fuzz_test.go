package file

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// FuzzParseFile feeds arbitrary bytes through the manifest decoder and the
// node-local rules: nothing may panic, and whatever is served must be
// well-formed (ports in range, endpoints sorted by key, addresses valid).
// Seeds are in testdata/fuzz/FuzzParseFile.
func FuzzParseFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _, err := parseFile("fuzz.yaml", data, nil)
		if err != nil {
			return
		}
		st := nodelocal.NewState(nodelocal.Config{NodeName: "node-1"})
		for _, d := range docs {
			if d.err != nil {
				if d.err.Kind == "" && d.ref.kind != "" {
					t.Errorf("decode error without kind: %v", d.err)
				}
				continue
			}
			switch o := d.obj.(type) {
			case *corev1.Service:
				_ = st.SetService(o)
			case *discoveryv1.EndpointSlice:
				_ = st.SetSlice(o)
			case *corev1.Node:
				st.SetNode(o)
			}
		}
		for se := range st.Snapshot().All() {
			for _, p := range se.Service.Ports {
				if p.Port < 1 || p.Port > 65535 || p.NodePort < 0 || p.NodePort > 65535 {
					t.Errorf("%s: port out of range: %+v", se.Service.Key(), p)
				}
			}
			for _, a := range se.Service.ClusterIPs.All() {
				if !a.IsValid() {
					t.Errorf("%s: invalid cluster IP", se.Service.Key())
				}
			}
			for i, e := range se.Endpoints {
				if i > 0 && se.Endpoints[i-1].Key >= e.Key {
					t.Errorf("%s: endpoints not sorted by unique key", se.Service.Key())
				}
				if e.IPs.Len() == 0 {
					t.Errorf("%s: endpoint %s without address", se.Service.Key(), e.Key)
				}
			}
		}
	})
}
