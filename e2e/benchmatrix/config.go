package benchmatrix

import (
	"time"

	"k8s.io/client-go/kubernetes"
)

// Scenarios, in the order the driver runs them.
const (
	ScInitial        = "initial sync"
	ScInitialStrace  = "initial sync under strace"
	ScRestart        = "restart, cluster unchanged"
	ScSteady         = "steady, nothing changed (per minute)"
	ScEndpointAdd    = "one endpoint added"
	ScEndpointRemove = "one endpoint removed"
	ScServiceAdd     = "one service added"
	ScServiceRemove  = "one service removed"
	ScOnePercent     = "1% of services changed"
	// ScFloor is netlinkraw/ipvs's BenchmarkFloor in the VM of an IPVS
	// sink, before its driver: the same size's IPVS objects, pre-encoded,
	// written as fast as the kernel takes them.
	ScFloor = "pre-encoded IPVS floor"
	// ScNFTFloor is netlinkraw/nft's pre-encoded floor
	// (BenchmarkCommit10k/preencoded-floor: 10,000 chains of one rule and
	// a 10,000-element verdict map, encoded before the clock, then sent
	// and committed in one batch into a fresh namespace), run on the host
	// just before the nftables sink's driver at 10,000 x 10.
	ScNFTFloor = "pre-encoded nf_tables floor"
	// ScNFTOwnFloor is the nftables package's BenchmarkFirstSyncFloor
	// (chunked): a Proxier's first sync of a generated cluster of N
	// services x 10 endpoints into a fresh namespace (SyncSeconds: render,
	// compile, diff, encode, commit), then the very transactions it
	// committed, encoded before the clock, committed into another fresh
	// namespace (Seconds: the floor); CPUSeconds is the floor's CPU. It
	// needs no cluster: the scenario "nft-floor" alone runs only it.
	ScNFTOwnFloor = "nftables sink's own transactions, pre-encoded"
)

// fullSizes are the full matrix's sizes (services, endpoints each), the
// summary's rows.
var fullSizes = [][2]int{{1000, 10}, {10000, 10}, {30000, 10}, {1000, 100}}

// Sink is one proxy under test.
type Sink struct {
	// Name is the row's name, e.g. "ipvs-fullstate" or "kube-proxy ipvs".
	Name string `json:"name"`
	// Kind is the kernel back end it programs (KindIPVS, ...).
	Kind string `json:"kind"`
	// Bin is the executable; Args its arguments but --kubeconfig.
	Bin  string   `json:"bin"`
	Args []string `json:"args"`
	// Kubeconfig is the file the proxy reads (its server is apiListen).
	Kubeconfig string `json:"kubeconfig"`
	// KubeProxy marks kube-proxy itself (the baseline of its Kind).
	KubeProxy bool `json:"kubeProxy"`
}

// Sample is one measured cell repetition.
type Sample struct {
	Sink      string `json:"sink"`
	Kind      string `json:"kind"`
	KubeProxy bool   `json:"kubeProxy"`
	Scenario  string `json:"scenario"`
	Services  int    `json:"services"`
	Endpoints int    `json:"endpoints"`
	Rep       int    `json:"rep"`
	// Seconds is from process start (or the first API write) until the
	// kernel was seen programmed; for the steady window, its length.
	Seconds float64 `json:"seconds"`
	// SelfSeconds (initial syncs) is from process start
	// (process_start_time_seconds) to the end of the proxy's last sync
	// (kubeproxy_sync_proxy_rules_last_timestamp_seconds), both from its
	// own metrics read once the kernel was seen programmed: free of the
	// kernel probe's resolution, which a large table's listing makes
	// seconds long; an upper bound for a proxy that synced again before
	// the probe saw the kernel programmed.
	SelfSeconds float64 `json:"selfSeconds,omitempty"`
	// CPUSeconds is the process's (and its waited children's) CPU over
	// the same interval.
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSMB is the process's VmHWM at the end of the interval.
	PeakRSSMB float64 `json:"peakRssMB"`
	// RestoreBytes went to iptables-restore and ip6tables-restore.
	RestoreBytes int64 `json:"restoreBytes"`
	// NFTBytes were written to nf_tables: the input of nft -f (kube-proxy's
	// nftables mode, counted by a wrapper of nft first on its PATH), or
	// the netlink bytes the nftables sink sent (the bytes of its "sync"
	// log lines); for ScNFTFloor, the floor's batch.
	NFTBytes int64 `json:"nftBytes,omitempty"`
	// Syscalls counted by strace -f -c (ScInitialStrace only), and of
	// them the socket message calls (sendmsg, recvmsg, sendto, recvfrom
	// and their mmsg forms): the netlink traffic. In a cell that timed
	// out (Error set), what strace counted until then: lower bounds.
	Syscalls        int64 `json:"syscalls,omitempty"`
	MessageSyscalls int64 `json:"messageSyscalls,omitempty"`
	// KernelOps and NetlinkSyscalls are the sinks' own counters
	// (proxysinks_kernel_operations_total, proxysinks_netlink_syscalls_total)
	// over the interval; -1 when the proxy has none.
	KernelOps       float64 `json:"kernelOps"`
	NetlinkSyscalls float64 `json:"netlinkSyscalls"`
	// Syncs and SyncSeconds are the proxy's own
	// kubeproxy_sync_proxy_rules_duration_seconds (count and sum) over the
	// interval: its time programming the kernel, without start-up,
	// the API's delivery or coalescing (every proxy has it).
	Syncs       float64 `json:"syncs,omitempty"`
	SyncSeconds float64 `json:"syncSeconds,omitempty"`
	// Programmed and ProgrammedSeconds are a sink's
	// proxysinks_snapshot_programming_duration_seconds (count and sum)
	// over the interval: from a change reaching the sink, after the
	// source's coalescing, to the kernel programmed.
	Programmed        float64 `json:"programmed,omitempty"`
	ProgrammedSeconds float64 `json:"programmedSeconds,omitempty"`
	// GCs is the proxy's garbage collections over the interval
	// (go_gc_duration_seconds_count); -1 when it has no such metric.
	GCs float64 `json:"gcs"`
	// StallSeconds (the change cells) is the latest the driver's
	// realtime thread, due every millisecond, woke during the interval:
	// how long the machine ran nothing (stallWatch).
	StallSeconds float64 `json:"stallSeconds,omitempty"`
	// KernelChanged is set when a restart changed the kernel's state.
	KernelChanged bool `json:"kernelChanged,omitempty"`
	// ProbeSeconds is the mean time of one kernel probe of the cell: the
	// resolution of Seconds is about twice that.
	ProbeSeconds float64 `json:"probeSeconds"`
	Error        string  `json:"error,omitempty"`
}

// Config is one driver run: one proxy against one loaded cluster.
type Config struct {
	Sink                Sink
	Services, Endpoints int
	// Reps repeats the initial sync, restart, service and 1% cells;
	// EndpointReps the one-endpoint cells.
	Reps, EndpointReps int
	// Steady is the length of the nothing-changed window.
	Steady time.Duration
	// ChangeArgs are appended to the proxy's arguments for the restart
	// and change cells (after the steady window); they set a long
	// periodic resync so that no resync overlaps a change.
	ChangeArgs []string
	// Strace, when not empty, is strace's path: one more initial sync
	// runs under strace -f -c, tracing the socket message calls only
	// (--seccomp-bpf: the others run at full speed), or every call with
	// StraceAll (slow: kube-proxy makes millions).
	Strace    string
	StraceAll bool
	// APITarget is the apiserver's host:port as the driver reaches it;
	// Client writes to it.
	APITarget string
	Client    kubernetes.Interface `json:"-"`
	// Timeout bounds each wait for the kernel.
	Timeout time.Duration
	// ProbeGap is the least pause between two kernel probes (zero: as
	// long as the last probe took, at least 2 ms).
	ProbeGap time.Duration
	// Only, when not nil, runs only the scenarios it names (the keys of
	// Scenarios); the others are skipped. Any cell after the initial sync
	// needs a programmed kernel, so selecting one runs an initial sync
	// too, unmeasured unless "initial" is selected (no sample, no IPVS
	// floor); "strace" alone runs only the initial sync under strace.
	Only map[string]bool
	// Work is a scratch directory.
	Work string
	// Emit receives every sample as it is measured; Logf progress.
	Emit func(Sample)                     `json:"-"`
	Logf func(format string, args ...any) `json:"-"`
}

// Scenarios are the names PROXYSINKS_BENCH_SCENARIOS takes: "endpoint"
// selects one endpoint added and removed, "service" one service added and
// removed, "percent" 1% changed, "strace" the initial sync under strace,
// "nft-floor" the nftables sink's floor (ScNFTOwnFloor; alone, without a
// cluster), the others the scenario of that name.
var Scenarios = []string{"initial", "steady", "restart", "endpoint", "service", "percent", "strace", "nft-floor"}

// runs reports whether the run includes the scenario of short name name.
func (c *Config) runs(name string) bool { return c.Only == nil || c.Only[name] }

// needsProxy reports whether any cell but the strace one and the
// nftables floor runs: they all start from the initial sync (and the IPVS
// floor is measured beside it).
func (c *Config) needsProxy() bool {
	for _, name := range Scenarios {
		if name != "strace" && name != "nft-floor" && c.runs(name) {
			return true
		}
	}
	return false
}

// relaunchForChanges reports whether the proxy must be started again with
// ChangeArgs, unmeasured, before the change cells: they run at the long
// resync period, which the restart cells would otherwise have set.
func (c *Config) relaunchForChanges() bool {
	if len(c.ChangeArgs) == 0 || c.runs("restart") {
		return false
	}
	return c.runs("endpoint") || c.runs("service") || c.runs("percent")
}

// initialReps is the number of initial syncs before the other cells:
// Reps when they are measured, else the one the other cells need.
func (c *Config) initialReps() int {
	if c.runs("initial") {
		return c.Reps
	}
	return 1
}

// Rows are the matrix's rows in their default order: every sink binary
// (the IPVS sinks twice, the second time binding virtual IPs with routes)
// and kube-proxy v1.37.2 in each of its modes. bin returns the path of the
// binary built from sinks/<sink>; kubeProxy is kube-proxy's path. A sink
// added under sinks/ adds its row here (docs/adding-a-sink.md).
func Rows(bin func(sink string) string, kubeProxy string) []Sink {
	return []Sink{
		{Name: "ipvs-fullstate", Kind: KindIPVS, Bin: bin("ipvs-fullstate")},
		{Name: "ipvs-incremental", Kind: KindIPVS, Bin: bin("ipvs-incremental")},
		{Name: "ipvs-fullstate routes", Kind: KindIPVS, Bin: bin("ipvs-fullstate"), Args: []string{"--ipvs-vip-binding=routes"}},
		{Name: "ipvs-incremental routes", Kind: KindIPVS, Bin: bin("ipvs-incremental"), Args: []string{"--ipvs-vip-binding=routes"}},
		{Name: "kube-proxy ipvs", Kind: KindIPVS, KubeProxy: true, Bin: kubeProxy, Args: []string{"--proxy-mode=ipvs"}},
		{Name: "iptables", Kind: KindIPTables, Bin: bin("iptables")},
		{Name: "kube-proxy iptables", Kind: KindIPTables, KubeProxy: true, Bin: kubeProxy, Args: []string{"--proxy-mode=iptables"}},
		{Name: "nftables", Kind: KindNFTables, Bin: bin("nftables")},
		{Name: "kube-proxy nftables", Kind: KindNFTables, KubeProxy: true, Bin: kubeProxy, Args: []string{"--proxy-mode=nftables"}},
	}
}
