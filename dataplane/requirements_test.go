package dataplane

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func TestRequiredIPVSModules(t *testing.T) {
	tests := []struct {
		v     kernel.Version
		sched string
		want  []string
	}{
		{kernel.Version{Major: 4, Minor: 18}, "rr", []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack_ipv4"}},
		{kernel.Version{Major: 4, Minor: 19}, "rr", []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack"}},
		{kernel.Version{Major: 6, Minor: 1}, "mh", []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack", "ip_vs_mh"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, RequiredIPVSModules(tt.v, tt.sched)); diff != "" {
			t.Errorf("RequiredIPVSModules(%v, %s) (-want +got):\n%s", tt.v, tt.sched, diff)
		}
	}
}

func TestIPVSSysctls(t *testing.T) {
	names := func(s []kernel.Setting) (out []string) {
		for _, x := range s {
			out = append(out, x.Name)
		}
		return out
	}
	has := func(v kernel.Version, strict bool, name string) bool {
		for _, n := range names(IPVSSysctls(v, strict)) {
			if n == name {
				return true
			}
		}
		return false
	}
	for _, tt := range []struct {
		v     kernel.Version
		reuse bool
	}{{kernel.Version{Major: 4, Minor: 0}, false}, {kernel.Version{Major: 4, Minor: 1}, true}, {kernel.Version{Major: 5, Minor: 8}, true}, {kernel.Version{Major: 5, Minor: 9}, false}, {kernel.Version{Major: 6, Minor: 1}, false}} {
		if got := has(tt.v, false, "net/ipv4/vs/conn_reuse_mode"); got != tt.reuse {
			t.Errorf("kernel %v: conn_reuse_mode set = %v, want %v", tt.v, got, tt.reuse)
		}
	}
	if !has(kernel.Version{Major: 6, Minor: 1}, true, "net/ipv4/conf/all/arp_ignore") || has(kernel.Version{Major: 6, Minor: 1}, false, "net/ipv4/conf/all/arp_ignore") {
		t.Error("arp_ignore must be set exactly when strict ARP is on")
	}
}

// TestIPVSSetupKernel loads the IPVS modules with modprobe and applies the
// IPVS sysctls in a fresh namespace. It needs a kernel with IPVS: the VM.
func TestIPVSSetupKernel(t *testing.T) {
	v, err := kernel.Running()
	if err != nil {
		t.Fatal(err)
	}
	if err := (kernel.Modules{}).Ensure(RequiredIPVSModules(v, "mh")); err != nil {
		nstest.Missing(t, "IPVS modules: %v", err)
	}
	have, err := kernel.Modules{}.Present()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"ip_vs", "ip_vs_mh", "nf_conntrack"} {
		if !have[m] {
			t.Errorf("module %s not present after Ensure", m)
		}
	}
	ns := nstest.New(t)
	err = ns.Do(func() error {
		s := kernel.Sysctl{}
		settings := IPVSSysctls(v, true)
		n, err := kernel.EnsureAll(s, settings)
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("a fresh namespace needed no sysctl change")
		}
		if n, err := kernel.EnsureAll(s, settings); err != nil || n != 0 {
			return errors.Join(err, errors.New("second EnsureAll wrote again"))
		}
		for _, st := range settings {
			if got, err := s.Get(st.Name); err != nil || got != st.Value {
				return errors.Join(err, errors.New(st.Name+" not set"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
