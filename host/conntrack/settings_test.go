package conntrack

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func TestMax(t *testing.T) {
	tests := []struct {
		name               string
		perCore, min, cpus int
		want               int
	}{
		{"kube-proxy's defaults, 2 CPUs: the floor", 32768, 131072, 2, 131072},
		{"kube-proxy's defaults, 8 CPUs: scaled", 32768, 131072, 8, 262144},
		{"capped", 32768, 0, 64, 1 << 20},
		{"a floor above the cap wins", 1, 2 << 20, 1, 2 << 20},
		{"maxPerCore 0 leaves it", 0, 131072, 8, 0},
	}
	for _, tt := range tests {
		if got := (Settings{MaxPerCore: tt.perCore, Min: tt.min}).Max(tt.cpus); got != tt.want {
			t.Errorf("%s: Max = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-3": 4, "0-3,5,7-8": 7} {
		if got, ok := countCPUList(in); !ok || got != want {
			t.Errorf("countCPUList(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "a", "3-1"} {
		if _, ok := countCPUList(in); ok {
			t.Errorf("countCPUList(%q) accepted", in)
		}
	}
}

// fakeNode is a /proc/sys and a hashsize file in a directory, with the
// given values.
func fakeNode(t *testing.T, vals map[string]int, hashsize int) Node {
	dir := t.TempDir()
	for name, v := range vals {
		p := filepath.Join(dir, "sys", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hs := filepath.Join(dir, "hashsize")
	if err := os.WriteFile(hs, []byte(strconv.Itoa(hashsize)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Node{Sysctl: kernel.Sysctl{Root: filepath.Join(dir, "sys")}, Hashsize: hs, NumCPU: 4}
}

func TestApply(t *testing.T) {
	kernelDefaults := map[string]int{SysctlMax: 65536, SysctlTCPEstablishedTimeout: 432000, SysctlTCPCloseWaitTimeout: 60,
		SysctlTCPBeLiberal: 0, SysctlUDPTimeout: 30, SysctlUDPStreamTimeout: 120}
	tests := []struct {
		name     string
		s        Settings
		vals     map[string]int
		hashsize int
		want     []kernel.Setting
	}{
		{"kube-proxy's defaults", Defaults(), kernelDefaults, 16384, []kernel.Setting{
			{Name: SysctlMax, Value: 131072}, {Name: "hashsize", Value: 32768},
			{Name: SysctlTCPEstablishedTimeout, Value: 86400}, {Name: SysctlTCPCloseWaitTimeout, Value: 3600}}},
		{"never lowered; the hash table already large", Settings{MaxPerCore: 1, Min: 1000}, kernelDefaults, 16384, nil},
		{"the hash table raised to a quarter of the limit in place", Settings{MaxPerCore: 16384}, kernelDefaults, 8192, []kernel.Setting{{Name: "hashsize", Value: 16384}}},
		{"every setting", Settings{TCPEstablishedTimeout: time.Hour, TCPCloseWaitTimeout: 90 * time.Second, TCPBeLiberal: true, UDPTimeout: 45 * time.Second, UDPStreamTimeout: 150 * time.Second},
			kernelDefaults, 16384, []kernel.Setting{
				{Name: SysctlTCPEstablishedTimeout, Value: 3600}, {Name: SysctlTCPCloseWaitTimeout, Value: 90},
				{Name: SysctlUDPTimeout, Value: 45}, {Name: SysctlUDPStreamTimeout, Value: 150}, {Name: SysctlTCPBeLiberal, Value: 1}}},
		{"values already there", Settings{TCPCloseWaitTimeout: time.Minute, UDPTimeout: 30 * time.Second}, kernelDefaults, 16384, nil},
		{"nothing set", Settings{}, map[string]int{}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakeNode(t, tt.vals, tt.hashsize)
			a, err := Apply(tt.s, n)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, a.Written); diff != "" {
				t.Errorf("written (-want +got):\n%s", diff)
			}
			for _, w := range a.Written {
				var got int
				if w.Name == "hashsize" {
					b, _ := os.ReadFile(n.Hashsize)
					got, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				} else {
					got, _ = n.Sysctl.Get(w.Name)
				}
				if got != w.Value {
					t.Errorf("%s holds %d, want %d", w.Name, got, w.Value)
				}
			}
			// Again: nothing to write.
			if a, err := Apply(tt.s, n); err != nil || len(a.Written) > 0 {
				t.Errorf("second Apply wrote %v, %v", a.Written, err)
			}
		})
	}
	// A missing sysctl (no nf_conntrack) is an error naming it.
	_, err := Apply(Settings{UDPTimeout: time.Second}, fakeNode(t, nil, 0))
	if err == nil || !strings.Contains(err.Error(), SysctlUDPTimeout) {
		t.Errorf("Apply without the sysctl: %v; want an error naming %s", err, SysctlUDPTimeout)
	}
}

// TestKernelApply applies every setting in a fresh network namespace,
// where the timeouts and nf_conntrack_tcp_be_liberal are the namespace's
// own: the namespace holds them and the host keeps its values.
// nf_conntrack_max is the host's (read-only outside its initial namespace
// on recent kernels): Apply must leave it and say so; on a kernel where
// it is writable from the namespace the limit is not asked for (it would
// change the host's). The hash table's size is a stand-in file: the
// module parameter is global to the host.
func TestKernelApply(t *testing.T) {
	host := kernel.Sysctl{}
	names := []string{SysctlMax, SysctlTCPEstablishedTimeout, SysctlTCPCloseWaitTimeout, SysctlTCPBeLiberal, SysctlUDPTimeout, SysctlUDPStreamTimeout}
	before := map[string]int{}
	for _, name := range names {
		v, err := host.Get(name)
		if err != nil {
			nstest.Missing(t, "conntrack sysctls (nf_conntrack): %v", err)
		}
		before[name] = v
	}
	hs := filepath.Join(t.TempDir(), "hashsize")
	if err := os.WriteFile(hs, []byte("1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Values that differ from the host's.
	pick := func(name string, a, b int) int {
		if before[name] == a {
			return b
		}
		return a
	}
	s := Settings{
		TCPEstablishedTimeout: time.Duration(pick(SysctlTCPEstablishedTimeout, 7200, 7300)) * time.Second,
		TCPCloseWaitTimeout:   time.Duration(pick(SysctlTCPCloseWaitTimeout, 1800, 1900)) * time.Second,
		UDPTimeout:            time.Duration(pick(SysctlUDPTimeout, 45, 46)) * time.Second,
		UDPStreamTimeout:      time.Duration(pick(SysctlUDPStreamTimeout, 150, 151)) * time.Second,
		TCPBeLiberal:          before[SysctlTCPBeLiberal] == 0,
	}
	ns := nstest.New(t)
	var a Applied
	var inNS map[string]int
	var maxWritable bool
	err := ns.Do(func() error {
		fi, err := os.Stat("/proc/sys/" + SysctlMax)
		if err != nil {
			return err
		}
		maxWritable = fi.Mode().Perm()&0o222 != 0
		if !maxWritable {
			// Above the host's: Apply would raise it.
			s.MaxPerCore, s.Min = 1, before[SysctlMax]+1
		}
		if a, err = Apply(s, Node{Hashsize: hs}); err != nil {
			return err
		}
		inNS = map[string]int{}
		for _, name := range names {
			if inNS[name], err = host.Get(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		SysctlMax:                   before[SysctlMax],
		SysctlTCPEstablishedTimeout: seconds(s.TCPEstablishedTimeout),
		SysctlTCPCloseWaitTimeout:   seconds(s.TCPCloseWaitTimeout),
		SysctlUDPTimeout:            seconds(s.UDPTimeout),
		SysctlUDPStreamTimeout:      seconds(s.UDPStreamTimeout),
		SysctlTCPBeLiberal:          before[SysctlTCPBeLiberal],
	}
	if s.TCPBeLiberal {
		want[SysctlTCPBeLiberal] = 1
	}
	if diff := cmp.Diff(want, inNS); diff != "" {
		t.Errorf("the namespace's conntrack sysctls (-want +got):\n%s", diff)
	}
	if maxWritable {
		t.Logf("nf_conntrack_max is writable from a network namespace on this kernel: the limit was not tested (it would change the host's)")
	} else if a.MaxSkipped == "" {
		t.Errorf("nf_conntrack_max is read-only here and lower than asked, but Apply did not say it left it")
	}
	if b, _ := os.ReadFile(hs); strings.TrimSpace(string(b)) != "1024" {
		t.Errorf("the hash table's size was written (%s) though the limit was left", b)
	}
	for _, name := range names {
		if v, err := host.Get(name); err != nil || v != before[name] {
			t.Errorf("the host's %s is %d (%v), was %d", name, v, err, before[name])
		}
	}
}
