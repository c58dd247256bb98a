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
	err := m.Ensure([]string{"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "nf_conntrack", "ip_vs_mh"})
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

func TestEnsureAll(t *testing.T) {
	root := t.TempDir()
	for name, v := range map[string]string{"net/ipv4/ip_forward": "0\n", "net/ipv4/conf/all/arp_ignore": "1\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := Sysctl{Root: root}
	settings := []Setting{{"net/ipv4/ip_forward", 1}, {"net.ipv4.conf.all.arp_ignore", 1}}
	if n, err := EnsureAll(s, settings); err != nil || n != 1 {
		t.Fatalf("first EnsureAll = %d, %v; want 1 write", n, err)
	}
	if n, err := EnsureAll(s, settings); err != nil || n != 0 {
		t.Fatalf("second EnsureAll = %d, %v; want no write", n, err)
	}
	if got, err := s.Get("net/ipv4/ip_forward"); err != nil || got != 1 {
		t.Errorf("ip_forward = %d, %v; want 1", got, err)
	}
	_, err := EnsureAll(s, append(settings, Setting{"net/ipv4/missing", 1}))
	if err == nil || !strings.Contains(err.Error(), "net/ipv4/missing") {
		t.Errorf("missing sysctl: EnsureAll error = %v, want one naming it", err)
	}
}
