package benchmatrix

import (
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// Results is one run of the matrix, as saved in
// bench/report/results-<label>.json.
type Results struct {
	Label    string    `json:"label"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Command  string    `json:"command"`
	// HostLoad is the host's 1-minute load average, read at the start and
	// after each proxy.
	HostLoad []float64 `json:"hostLoad,omitempty"`
	// Supplement marks a run of some sinks alone (SupplementEnv): its
	// samples fill only the sizes and scenarios no other run measured, so
	// that it never takes out the kube-proxy rows of the same size that the
	// sinks are compared with; the memory section reads all of them.
	Supplement bool `json:"supplement,omitempty"`
	// CountsNFT marks a run that counted the bytes written to nf_tables
	// (Sample.NFTBytes); older runs did not.
	CountsNFT bool     `json:"countsNFT,omitempty"`
	Samples   []Sample `json:"samples"`
}

// hostLoad returns the 1-minute load average (0 when unreadable).
func hostLoad() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// Machine describes where a run ran.
type Machine struct {
	CPU        string  `json:"cpu"`
	CPUs       int     `json:"cpus"`
	MemoryGiB  float64 `json:"memoryGiB"`
	HostKernel string  `json:"hostKernel"`
	VMKernel   string  `json:"vmKernel"`
	IPTables   string  `json:"iptables"`
	NFT        string  `json:"nft"`
	Go         string  `json:"go"`
}

func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.MemoryGiB = math.Round(kb/(1<<20)*10) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.HostKernel = strings.TrimSpace(string(b))
	}
	if dir, err := vm.DefaultCacheDir(); err == nil {
		if k, err := vm.FindKernel(dir); err == nil {
			m.VMKernel = k.Version
		}
	}
	if b, err := exec.Command("iptables", "-V").Output(); err == nil {
		m.IPTables = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("nft", "-v").Output(); err == nil {
		m.NFT = strings.TrimSpace(string(b))
	}
	return m
}
