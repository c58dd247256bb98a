package node

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// Kernel is what a sink programs; it decides where the sink's cases run
// and the expectations where a mode legitimately differs.
type Kernel string

// The kernels the sinks program.
const (
	// IPVS sinks program IPVS, ipsets, kube-ipvs0 and iptables.
	IPVS Kernel = "ipvs"
	// IPTables sinks program iptables (nf_tables or legacy).
	IPTables Kernel = "iptables"
	// NFTables sinks program nf_tables tables of their own (kube-proxy's
	// nftables mode: tables ip and ip6 kube-proxy).
	NFTables Kernel = "nftables"
)

// NeedsVM reports whether the kernel's sinks run in the test VM: IPVS
// and dummy links are not in the host kernel, iptables and nf_tables
// are, so those sinks run in fresh network namespaces of the host.
func (k Kernel) NeedsVM() bool { return k == IPVS }

// Sinks are the sinks with traffic cases, keyed by name (their main
// package under sinks/): the kernel each programs.
var Sinks = map[string]Kernel{
	"ipvs-fullstate":   IPVS,
	"ipvs-incremental": IPVS,
	"iptables":         IPTables,
	"nftables":         NFTables,
}

// Case is one traffic case: a node built as with a bridge CNI, the sink
// under test, manifests and real requests with what must answer them.
type Case struct {
	Name string
	Run  func(t *testing.T)
	// Skip, keyed by kernel, says why the case does not apply to that
	// kernel's sinks.
	Skip map[Kernel]string
}

// Cases is the traffic case table every sink runs (RunCases). Where a
// kernel's answer legitimately differs, the case checks by sinkKernel().
var Cases = []Case{
	{Name: "BasicEndpoint", Run: caseBasicEndpoint},
	{Name: "Balanced", Run: caseBalanced},
	{Name: "Multiport", Run: caseMultiport},
	{Name: "SamePortDifferentProtocols", Run: caseSamePortDifferentProtocols},
	{Name: "NodePortFromOutside", Run: caseNodePortFromOutside},
	{Name: "ExternalTrafficLocalKeepsClientAddress", Run: caseExternalTrafficLocalKeepsClientAddress},
	{Name: "ExternalTrafficLocalNoLocalEndpoint", Run: caseExternalTrafficLocalNoLocalEndpoint},
	{Name: "SessionAffinity", Run: caseSessionAffinity},
	{Name: "ExternalIPAndLoadBalancerSourceRanges", Run: caseExternalIPAndLoadBalancerSourceRanges},
	{Name: "InternalTrafficLocal", Run: caseInternalTrafficLocal},
	{Name: "NoEndpointsRejected", Run: caseNoEndpointsRejected},
	{Name: "EndpointRemovalGraceful", Run: caseEndpointRemovalGraceful},
	{Name: "UDPStaleConntrackFlushed", Run: caseUDPStaleConntrackFlushed, Skip: map[Kernel]string{
		IPVS: "not asserted for the IPVS sinks: the case checks the iptables sink's conntrack flush of a removed UDP endpoint"}},
	{Name: "UDPFirstEndpointConntrackCleared", Run: caseUDPFirstEndpointConntrackCleared, Skip: map[Kernel]string{
		IPVS: "not run in the VM yet: the IPVS sinks use the same reconciler (sinks/udpflows), tested with fakes"}},
	{Name: "UDPNodePortStaleConntrackCleared", Run: caseUDPNodePortStaleConntrackCleared, Skip: map[Kernel]string{
		IPVS: "not run in the VM yet: the IPVS sinks use the same reconciler (sinks/udpflows), tested with fakes"}},
	{Name: "Hairpin", Run: caseHairpin},
	{Name: "TypeChanges", Run: caseTypeChanges},
	{Name: "NetworkProgrammingLatency", Run: caseNetworkProgrammingLatency},
	{Name: "RestartNoWritesNoDrops", Run: caseRestartNoWritesNoDrops},
	{Name: "DualStack", Run: caseDualStack},
	{Name: "TerminatingEndpoints", Run: caseTerminatingEndpoints},
}

// RunCases runs every case of Cases against the sink of Use, a subtest
// each.
func RunCases(t *testing.T) { RunCasesExcept(t, nil) }

// RunCasesExcept runs the cases of Cases against the sink of Use, a
// subtest each, but those named in skip, which skip with the reason given
// there (for example a long run's cases in a short one).
func RunCasesExcept(t *testing.T, skip map[string]string) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := c.Skip[sinkKernel()]; ok {
				t.Skip(why)
			}
			if why, ok := skip[c.Name]; ok {
				t.Skip(why)
			}
			c.Run(t)
		})
	}
}

// sinkKernel is what the sink under test programs.
func sinkKernel() Kernel { return Sinks[options.Sink] }

// requireIPVS skips a test of the IPVS sinks' kernel side for other
// sinks.
func requireIPVS(t *testing.T) {
	t.Helper()
	if sinkKernel() != IPVS {
		t.Skipf("checks the IPVS sinks' kernel state; the sink under test is %s", options.Sink)
	}
}

// requireSCTP loads sctp in the VM, and skips on a host kernel without
// SCTP sockets.
func requireSCTP(t *testing.T) {
	t.Helper()
	if nstest.InVM() {
		if out, err := exec.Command("modprobe", "sctp").CombinedOutput(); err != nil {
			t.Fatalf("modprobe sctp: %v: %s", err, out)
		}
		return
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		nstest.Missing(t, "SCTP in this kernel")
	}
	unix.Close(fd)
}

// Rejects reports whether the kernel's sinks refuse a connection to a
// service without endpoints (kube-proxy's iptables REJECT rule, its
// nftables mode's reject-chain) rather than leave it unanswered (IPVS).
func (k Kernel) Rejects() bool { return k == IPTables || k == NFTables }
