package file

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// checkDecode decodes js with decode and with encoding/json alone: the
// values must be equal when encoding/json succeeds, and the errors the same
// when it fails.
func checkDecode[T any](t *testing.T, js []byte) {
	t.Helper()
	want := new(T)
	wantErr := json.Unmarshal(js, want)
	got, err := decode[T](js, asciiOnly(js))
	if wantErr != nil {
		if err == nil || err.Error() != wantErr.Error() {
			t.Fatalf("%T from %q: error %v, encoding/json says %v", want, js, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("%T from %q: %v, encoding/json succeeds", want, js, err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%T from %q:\ngot  %#v\nwant %#v", want, js, got, want)
	}
}

func checkDecodeAll(t *testing.T, js []byte) {
	checkDecode[header](t, js)
	checkDecode[corev1.Service](t, js)
	checkDecode[discoveryv1.EndpointSlice](t, js)
	checkDecode[corev1.Node](t, js)
}

func TestDecode(t *testing.T) {
	for _, js := range []string{
		`{"kind":"Service","metadata":{"name":"a","namespace":"b"},"spec":{"ports":[{"port":80,"targetPort":"http"}]}}`,
		`{"Kind":"Service","METADATA":{"Name":"a"},"spec":{"Ports":[{"PORT":80}]}}`,
		`{"kind":"Service","kind":"EndpointSlice","spec":{"ports":[{"port":1}],"ports":[{"port":2}]}}`,
		`{"metadata":{"labels":{"a":"1"},"labels":{"b":"2"}}}`,
		`{"spec":{"ports":[{"port":"eighty"}]}}`,
		`{"spec":{"ports":[{"port":80.0}]}}`,
		`{"spec":{"ports":[{"port":1e2}]}}`,
		`{"spec":{"ports":[{"port":99999999999}]}}`,
		`{"spec":{"ports":null,"clusterIP":null}}`,
		`{"metadata":{"name":"a\u003cb\"\\\n"}}`,
		`{"metadata":{"name":"\ud800"}}`,
		`{"endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true,"serving":null}}]}`,
		`{"endpoints":[{"conditions":{"ready":"true"}}]}`,
		`{"items":[{"kind":"Service"}],"kind":"List"}`,
		`{"items":{}}`,
		`{"kind":"Service"} x`,
		`{"kind":"Service",}`,
		`[1]`, `null`, `"x"`, `{"kind":1}`, `{"metadata":[]}`,
		`{"metadata":{"creationTimestamp":"2024-01-01T00:00:00Z","deletionGracePeriodSeconds":5}}`,
		`{"status":{"capacity":{"cpu":"2","memory":"1Gi"}},"spec":{"podCIDRs":["10.244.1.0/24"]}}`,
	} {
		checkDecodeAll(t, []byte(js))
	}
}

// FuzzDecode is the differential test of decode (go-json, then
// encoding/json on error) against encoding/json. Seeds are in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, js []byte) { checkDecodeAll(t, js) })
}
