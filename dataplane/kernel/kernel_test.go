package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
		err  bool
	}{
		{"6.1.0-57-cloud-amd64", Version{6, 1, 0}, false},
		{"5.10.209", Version{5, 10, 209}, false},
		{"4.19", Version{4, 19, 0}, false},
		{"6.18.44-fc-v782", Version{6, 18, 44}, false},
		{"3.10.0-1160.el7.x86_64", Version{3, 10, 0}, false},
		{"garbage", Version{}, true},
		{"", Version{}, true},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestRequiredIPVSModules(t *testing.T) {
	tests := []struct {
		v     Version
		sched string
		want  []string
	}{
		{Version{4, 18, 0}, "rr", []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack_ipv4"}},
		{Version{4, 19, 0}, "rr", []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack"}},
		{Version{6, 1, 0}, "mh", []string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack", "ip_vs_mh"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, RequiredIPVSModules(tt.v, tt.sched)); diff != "" {
			t.Errorf("RequiredIPVSModules(%v, %s) (-want +got):\n%s", tt.v, tt.sched, diff)
		}
	}
}

func TestIPVSSysctls(t *testing.T) {
	names := func(s []Setting) (out []string) {
		for _, x := range s {
			out = append(out, x.Name)
		}
		return out
	}
	has := func(v Version, strict bool, name string) bool {
		for _, n := range names(IPVSSysctls(v, strict)) {
			if n == name {
				return true
			}
		}
		return false
	}
	for _, tt := range []struct {
		v     Version
		reuse bool
	}{{Version{4, 0, 0}, false}, {Version{4, 1, 0}, true}, {Version{5, 8, 0}, true}, {Version{5, 9, 0}, false}, {Version{6, 1, 0}, false}} {
		if got := has(tt.v, false, "net/ipv4/vs/conn_reuse_mode"); got != tt.reuse {
			t.Errorf("kernel %v: conn_reuse_mode set = %v, want %v", tt.v, got, tt.reuse)
		}
	}
	if !has(Version{6, 1, 0}, true, "net/ipv4/conf/all/arp_ignore") || has(Version{6, 1, 0}, false, "net/ipv4/conf/all/arp_ignore") {
		t.Error("arp_ignore must be set exactly when strict ARP is on")
	}
}

func TestModulesEnsure(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		p = filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/modules", "ip_vs 184320 0 - Live 0x0\nip_vs_rr 16384 0 - Live 0x0\n")
	write("lib/modules/6.1.0-test/modules.builtin", "kernel/net/netfilter/nf_conntrack.ko\nkernel/net/netfilter/ipvs/ip_vs_wrr.ko\n")
	var probed []string
	m := Modules{Root: root, Release: "6.1.0-test", Modprobe: func(mod string) error {
		probed = append(probed, mod)
		if mod == "ip_vs_mh" {
			return errors.New("modprobe: FATAL: Module ip_vs_mh not found")
		}
		return nil
	}}
	err := m.Ensure(RequiredIPVSModules(Version{6, 1, 0}, "mh"))
	if diff := cmp.Diff([]string{"ip_vs_sh", "ip_vs_mh"}, probed); diff != "" {
		t.Errorf("modprobe calls (-want +got):\n%s", diff)
	}
	var me *MissingError
	if !errors.As(err, &me) || !cmp.Equal(me.Modules, []string{"ip_vs_mh"}) {
		t.Fatalf("Ensure error = %v, want MissingError for ip_vs_mh", err)
	}
	for _, want := range []string{"ip_vs_mh", "modprobe -a ip_vs_mh", "Module ip_vs_mh not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := m.Ensure([]string{"ip_vs", "nf_conntrack_ipv4"}); err != nil {
		t.Errorf("present modules: %v", err)
	}
}

// TestSysctlKernel sets a network sysctl in a fresh namespace and shows the
// host's value is untouched and a second call writes nothing.
func TestSysctlKernel(t *testing.T) {
	ns := nstest.New(t)
	s := Sysctl{}
	host, err := s.Get("net/ipv4/conf/all/arp_announce")
	if err != nil {
		t.Fatal(err)
	}
	want := 2
	if host == 2 {
		want = 1
	}
	err = ns.Do(func() error {
		if wrote, err := EnsureSysctl(s, "net/ipv4/conf/all/arp_announce", want); err != nil || !wrote {
			return errors.Join(err, errors.New("first EnsureSysctl did not write"))
		}
		if wrote, err := EnsureSysctl(s, "net/ipv4/conf/all/arp_announce", want); err != nil || wrote {
			return errors.Join(err, errors.New("second EnsureSysctl wrote again"))
		}
		got, err := s.Get("net/ipv4/conf/all/arp_announce")
		if err == nil && got != want {
			err = errors.New("value not set")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := s.Get("net/ipv4/conf/all/arp_announce"); now != host {
		t.Fatalf("host value changed from %d to %d", host, now)
	}
	if _, err := EnsureSysctl(s, "net/ipv4/no_such_sysctl", 1); err == nil || !strings.Contains(err.Error(), "net/ipv4/no_such_sysctl") {
		t.Errorf("missing sysctl error = %v, want one naming it", err)
	}
}

// TestIPVSSetupKernel loads the IPVS modules with modprobe and applies the
// IPVS sysctls in a fresh namespace. It needs a kernel with IPVS: the VM.
func TestIPVSSetupKernel(t *testing.T) {
	v, err := Running()
	if err != nil {
		t.Fatal(err)
	}
	if err := (Modules{}).Ensure(RequiredIPVSModules(v, "mh")); err != nil {
		nstest.Missing(t, "IPVS modules: %v", err)
	}
	have, err := Modules{}.Present()
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
		s := Sysctl{}
		settings := IPVSSysctls(v, true)
		n, err := EnsureAll(s, settings)
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("a fresh namespace needed no sysctl change")
		}
		if n, err := EnsureAll(s, settings); err != nil || n != 0 {
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
