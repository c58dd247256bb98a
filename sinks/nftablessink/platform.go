package nftablessink

import (
	"log/slog"

	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/sinks/ipvssink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// platform are the clean-ups of what the other proxy modes leave on a
// node (their --cleanup), each run at start.
type platform struct {
	// IPTables removes kube-proxy's iptables-mode chains and jumps (and
	// the iptables sink's, the same), both families and backends.
	IPTables func() error
	// IPVS removes kube-proxy's IPVS mode's (and the IPVS sinks') virtual
	// servers, kube-ipvs0, ipsets and chains; it fails at once on a kernel
	// without IPVS.
	IPVS func(runtime.Config, *slog.Logger) error
}

// otherModes are the other modes' clean-ups: the iptables sink's and the
// IPVS sinks' --cleanup.
var otherModes = platform{
	IPTables: func() error { return iptables.CleanupLeftovers(nil) },
	IPVS:     ipvssink.Sink("ipvs", "", nil).Cleanup,
}

// cleanOtherModes removes, best effort, what kube-proxy's other modes (or
// the other sinks) left on the node, as kube-proxy's nftables mode does at
// start (platformCleanup): their chains would still catch service traffic
// first, and kube-ipvs0's service addresses, local, would make
// `fib daddr type local` take every cluster IP for a NodePort address. A
// failure is logged and the start goes on, as in kube-proxy.
func cleanOtherModes(p platform, c runtime.Config, log *slog.Logger) {
	if err := p.IPTables(); err != nil {
		log.Warn("could not remove the iptables mode's leftovers", "error", err)
	}
	if err := p.IPVS(c, log); err != nil {
		log.Info("nothing of the IPVS mode removed", "error", err)
	}
}
