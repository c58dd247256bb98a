package iptables

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// TestSourceRangesAsKubeProxy renders load balancers whose source ranges
// kube-proxy v1.37.2 reads in its own way, from a manifest through the
// shared conversion (client/nodelocal), and checks each family's firewall:
// a zero-length range opens its family, a mapped range is its IPv4 range,
// a bad one is skipped alone (all bad: open), and a family without a range
// is open.
func TestSourceRangesAsKubeProxy(t *testing.T) {
	tests := []struct {
		name   string
		ranges []string
		// want are the -s arguments of the KUBE-FW- chain by family; nil:
		// no firewall (every client allowed).
		want4, want6 []string
	}{
		{name: "zero-length IPv4", ranges: []string{"0.0.0.0/0", "10.0.0.0/8"}, want6: nil},
		{name: "zero-length IPv6", ranges: []string{"::/0", "2001:db8::/32", "10.0.0.0/8"}, want4: []string{"10.0.0.0/8"}},
		{name: "IPv4-mapped IPv6 prefix", ranges: []string{"::ffff:10.0.0.0/104"}, want4: []string{"10.0.0.0/8"}},
		{name: "one bad range skipped alone", ranges: []string{"garbage", "172.16.0.0/12"}, want4: []string{"172.16.0.0/12"}},
		{name: "all bad: open", ranges: []string{"garbage"}},
		{name: "IPv4 only: IPv6 open", ranges: []string{"10.0.0.0/8"}, want4: []string{"10.0.0.0/8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.yaml")
			var rs strings.Builder
			for _, r := range tt.ranges {
				fmt.Fprintf(&rs, "  - %q\n", r)
			}
			manifest := `apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default}
spec:
  type: LoadBalancer
  ipFamilies: [IPv4, IPv6]
  clusterIPs: [10.96.0.30, "fd00:10:96::30"]
  ports: [{name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}]
  loadBalancerSourceRanges:
` + rs.String() + `status:
  loadBalancer:
    ingress: [{ip: 198.51.100.4}, {ip: "2001:db8:2::1"}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-4, namespace: default, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: [10.244.1.5]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-6, namespace: default, labels: {kubernetes.io/service-name: lb}}
addressType: IPv6
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: ["fd00:244::5"]}]
`
			if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			snap, err := file.New(file.Config{Path: path, NodeName: testNode}).Load()
			if err != nil {
				t.Fatal(err)
			}
			se := snap.Services()
			if len(se) != 1 {
				t.Fatalf("%d services, want 1", len(se))
			}
			for _, f := range []struct {
				fc   famConfig
				want []string
			}{{v4, tt.want4}, {famConfig{fam: xtables.IPv6, mark: "0x4000"}, tt.want6}} {
				var r rendered
				if err := render(&f.fc, se[0], false, &r); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, c := range r.chains {
					if !strings.HasPrefix(c.name, "KUBE-FW-") {
						continue
					}
					for _, l := range strings.Split(string(r.text(c)), "\n") {
						if fs := strings.Fields(l); len(fs) > 3 && fs[2] == "-s" {
							got = append(got, fs[3])
						}
					}
				}
				slices.Sort(got)
				if diff := cmp.Diff(f.want, got); diff != "" {
					t.Errorf("%s firewall sources (-want +got):\n%s", f.fc.fam, diff)
				}
			}
		})
	}
}
