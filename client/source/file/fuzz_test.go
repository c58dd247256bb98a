package file

import (
	"reflect"
	"strings"
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
		p, err := parseFile("fuzz.yaml", data, nil)
		if err != nil {
			return
		}
		for _, b := range p.bad {
			if b.Kind != "" || !strings.HasPrefix(b.Source, "fuzz.yaml#") || b.Err == nil {
				t.Errorf("a skipped document not named by file and index: %+v", b)
			}
		}
		docs := p.docs
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

// FuzzParseEquivalence is the differential test of the whole decoder
// against the one it replaced (legacyParseFile: apimachinery's YAMLReader,
// sigs.k8s.io/yaml, encoding/json): the same file error, the same objects,
// the same object errors. Seeds are in testdata/fuzz/FuzzParseEquivalence.
func FuzzParseEquivalence(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseFile("fuzz.yaml", data, nil)
		wantP, wantErr := legacyParseFile("fuzz.yaml", data)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%q: error %v, the old decoder says %v", data, err, wantErr)
		}
		if got.content != wantP.content || len(got.bad) != len(wantP.bad) {
			t.Fatalf("%q: %d documents read and %v skipped, the old decoder: %d and %v", data, got.content, got.bad, wantP.content, wantP.bad)
		}
		for i := range got.bad {
			if got.bad[i].Source != wantP.bad[i].Source {
				t.Fatalf("%q: skipped %v, the old decoder skips %v", data, got.bad, wantP.bad)
			}
		}
		docs, want := got.docs, wantP.docs
		if len(docs) != len(want) {
			t.Fatalf("%q: %d objects, the old decoder finds %d", data, len(docs), len(want))
		}
		for i := range docs {
			g, w := docs[i], want[i]
			if g.ref != w.ref || !reflect.DeepEqual(g.obj, w.obj) || (g.err == nil) != (w.err == nil) {
				t.Fatalf("%q: object %d: %+v (err %v), the old decoder gives %+v (err %v)", data, i, g, g.err, w, w.err)
			}
			if g.err != nil {
				ge, we := *g.err, *w.err
				if ge.Err.Error() != we.Err.Error() {
					t.Fatalf("%q: object %d: error %v, the old decoder says %v", data, i, g.err, w.err)
				}
				ge.Err, we.Err = nil, nil
				if ge != we {
					t.Fatalf("%q: object %d: error %+v, the old decoder says %+v", data, i, ge, we)
				}
			}
		}
	})
}
