package conntrack

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/host/kernel"
)

// Settings are kube-proxy's conntrack settings (KubeProxyConfiguration's
// conntrack, the --conntrack-* flags), which it applies to the node at
// start. A zero duration, and MaxPerCore 0, leave the kernel's value.
type Settings struct {
	// MaxPerCore and Min give nf_conntrack_max: MaxPerCore per CPU, at
	// least Min (Max).
	MaxPerCore, Min int
	// TCPEstablishedTimeout and TCPCloseWaitTimeout are
	// nf_conntrack_tcp_timeout_established and _close_wait.
	TCPEstablishedTimeout, TCPCloseWaitTimeout time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal to 1 (false leaves
	// it).
	TCPBeLiberal bool
	// UDPTimeout and UDPStreamTimeout are nf_conntrack_udp_timeout (flows
	// not answered) and nf_conntrack_udp_timeout_stream (answered).
	UDPTimeout, UDPStreamTimeout time.Duration
}

// Defaults returns kube-proxy v1.37's defaults: 32,768 entries per CPU
// and at least 131,072, TCP established timeout 24 h, close-wait 1 h; the
// rest left as the kernel has it.
func Defaults() Settings {
	return Settings{MaxPerCore: 32 * 1024, Min: 128 * 1024, TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour}
}

// maxLimit caps nf_conntrack_max, as kube-proxy does.
const maxLimit = 1 << 20

// Max returns the nf_conntrack_max the settings ask for on a node with
// numCPU CPUs: MaxPerCore × numCPU, at least Min and at most 1,048,576
// (as kube-proxy computes it); 0, leave it, when MaxPerCore is 0.
func (s Settings) Max(numCPU int) int {
	if s.MaxPerCore <= 0 {
		return 0
	}
	scaled := s.MaxPerCore * numCPU
	switch {
	case scaled > maxLimit:
		return maxLimit
	case scaled > s.Min:
		return scaled
	}
	return s.Min
}

// The sysctls the settings write, under /proc/sys.
const (
	SysctlMax                   = "net/netfilter/nf_conntrack_max"
	SysctlTCPEstablishedTimeout = "net/netfilter/nf_conntrack_tcp_timeout_established"
	SysctlTCPCloseWaitTimeout   = "net/netfilter/nf_conntrack_tcp_timeout_close_wait"
	SysctlTCPBeLiberal          = "net/netfilter/nf_conntrack_tcp_be_liberal"
	SysctlUDPTimeout            = "net/netfilter/nf_conntrack_udp_timeout"
	SysctlUDPStreamTimeout      = "net/netfilter/nf_conntrack_udp_timeout_stream"
)

// Node is where Apply reads and writes the settings.
type Node struct {
	// Sysctl is the node's /proc/sys (its network namespace's for the
	// per-namespace ones).
	Sysctl kernel.Sysctl
	// Hashsize is nf_conntrack's hashsize parameter file; "" is
	// /sys/module/nf_conntrack/parameters/hashsize. It is global to the
	// host.
	Hashsize string
	// NumCPU is the node's number of CPUs; 0 counts the online ones.
	NumCPU int
}

// Applied is what Apply did.
type Applied struct {
	// Written are the sysctls written, with their new values
	// ("hashsize" for the module parameter).
	Written []kernel.Setting
	// MaxSkipped, when not empty, says why nf_conntrack_max (and the
	// hashsize with it) was left lower than asked: the kernel makes it
	// read-only outside the host's initial network namespace.
	MaxSkipped string
}

// Apply applies s to the node as kube-proxy does at start: it raises
// nf_conntrack_max to Max (never lowers it) and the hash table's size to
// a quarter of it, then writes each timeout that is set, and
// nf_conntrack_tcp_be_liberal=1 when asked; a sysctl already holding its
// value is not written. Unlike kube-proxy, which exits, a node where
// nf_conntrack_max is read-only (a network namespace other than the
// host's) keeps its limit and the hashsize, and says so in MaxSkipped.
func Apply(s Settings, n Node) (Applied, error) {
	var a Applied
	if n.NumCPU <= 0 {
		n.NumCPU = onlineCPUs()
	}
	if err := a.raiseMax(s.Max(n.NumCPU), n); err != nil {
		return a, err
	}
	set := []kernel.Setting{
		{Name: SysctlTCPEstablishedTimeout, Value: seconds(s.TCPEstablishedTimeout)},
		{Name: SysctlTCPCloseWaitTimeout, Value: seconds(s.TCPCloseWaitTimeout)},
		{Name: SysctlUDPTimeout, Value: seconds(s.UDPTimeout)},
		{Name: SysctlUDPStreamTimeout, Value: seconds(s.UDPStreamTimeout)},
	}
	if s.TCPBeLiberal {
		set = append(set, kernel.Setting{Name: SysctlTCPBeLiberal, Value: 1})
	}
	for _, st := range set {
		if st.Value <= 0 {
			continue
		}
		wrote, err := kernel.EnsureSysctl(n.Sysctl, st.Name, st.Value)
		if err != nil {
			return a, fmt.Errorf("conntrack: apply the conntrack settings: %w", err)
		}
		if wrote {
			a.Written = append(a.Written, st)
		}
	}
	return a, nil
}

// raiseMax raises nf_conntrack_max to max, and the hashsize to max/4.
func (a *Applied) raiseMax(max int, n Node) error {
	if max <= 0 {
		return nil
	}
	cur, err := n.Sysctl.Get(SysctlMax)
	if err != nil {
		return fmt.Errorf("conntrack: apply the conntrack settings: %w", err)
	}
	if cur < max {
		if err := n.Sysctl.Set(SysctlMax, max); err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
				a.MaxSkipped = fmt.Sprintf("%s is %d, lower than %d, and read-only here (outside the host's initial network namespace): left as is, with the hash table's size", SysctlMax, cur, max)
				return nil
			}
			return fmt.Errorf("conntrack: apply the conntrack settings: %w", err)
		}
		a.Written = append(a.Written, kernel.Setting{Name: SysctlMax, Value: max})
	}
	path := n.Hashsize
	if path == "" {
		path = "/sys/module/nf_conntrack/parameters/hashsize"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("conntrack: read the hash table's size: %w", err)
	}
	size, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("conntrack: %s holds %q, not a number", path, strings.TrimSpace(string(b)))
	}
	if size < max/4 {
		if err := os.WriteFile(path, []byte(strconv.Itoa(max/4)), 0o640); err != nil {
			return fmt.Errorf("conntrack: set the hash table's size to %d: %w", max/4, err)
		}
		a.Written = append(a.Written, kernel.Setting{Name: "hashsize", Value: max / 4})
	}
	return nil
}

// seconds is d in whole seconds.
func seconds(d time.Duration) int { return int(d / time.Second) }

// onlineCPUs counts the CPUs online (/sys/devices/system/cpu/online, as
// kube-proxy does), else those the process may use.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n, ok := countCPUList(strings.TrimSpace(string(b)))
	if !ok || n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// countCPUList counts the CPUs of a kernel CPU list such as "0-3,5".
func countCPUList(s string) (int, bool) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, false
			}
		}
		n += b - a + 1
	}
	return n, true
}
