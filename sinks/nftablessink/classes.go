package nftablessink

import (
	"github.com/proxysinks/proxysinks/sinks/iptablessink"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// otherMode is the reason kube-proxy's settings of its other modes are
// ignored.
const otherMode = "another proxy mode's setting (kube-proxy's nftables mode ignores it too)"

// OtherSinks returns the flags of the other sinks, classed for the
// nftables sink. Each keeps its owner's kind and names. kube-proxy's
// IPVS flags (--ipvs-scheduler, --ipvs-*) and --iptables-localhost-nodeports
// are ignored and logged, as kube-proxy's nftables mode ignores them, and
// carry the file's field they map onto; the IPVS sinks' own (--weight,
// --ipvs-vip-binding, --ipvs-stats) are refused (exit status 2).
func OtherSinks() []runtime.Flag {
	fs := iptablessink.IPVSOnly()
	for i := range fs {
		if fs[i].Class == kpconfig.Ignored {
			fs[i].Why = otherMode
		}
	}
	return append(fs, runtime.Flag{Flag: &cli.BoolFlag{Name: "iptables-localhost-nodeports", Value: true}, Class: kpconfig.Ignored,
		Why:  "an iptables-mode setting (kube-proxy's nftables mode ignores it; its localhost NodePorts are the KubeProxyNFTablesLocalhostNodePorts gate's, which the sink refuses)",
		File: "iptables.localhostNodePorts"})
}

// flags are the nftables sink's: it has none of its own (kube-proxy
// v1.37.2 has no --nftables-* flag; the runtime's --sync-period,
// --iptables-sync-period, --masquerade-bit and --masquerade-all configure
// it), only its classes of the other sinks'.
func flags() []runtime.Flag { return OtherSinks() }

// fields class the KubeProxyConfiguration fields of the modes as
// kube-proxy's nftables mode reads them: the nftables sync periods are
// honoured (nftables.masqueradeBit and nftables.masqueradeAll are in
// every sink's table, kpconfig.MasqueradeSection); the iptables and ipvs
// settings are ignored (logged).
var fields = []kpconfig.Field{
	{Name: "nftables.syncPeriod", Class: kpconfig.Honoured, Flag: "sync-period"},
	{Name: "nftables.minSyncPeriod", Class: kpconfig.Honoured, Flag: "min-sync-period"},
	{Name: "iptables.syncPeriod", Class: kpconfig.Ignored, Why: "the nftables sink takes nftables.syncPeriod"},
	{Name: "iptables.minSyncPeriod", Class: kpconfig.Ignored, Why: "the nftables sink takes nftables.minSyncPeriod"},
	{Name: "iptables.masqueradeBit", Class: kpconfig.Ignored, Why: "the nftables sink takes nftables.masqueradeBit"},
	{Name: "iptables.masqueradeAll", Class: kpconfig.Ignored, Why: "the nftables sink takes nftables.masqueradeAll"},
	{Name: "iptables.localhostNodePorts", Class: kpconfig.Ignored, Why: "an iptables-mode setting (kube-proxy's nftables mode ignores it)"},
	{Name: "ipvs.syncPeriod", Class: kpconfig.Ignored, Why: "the nftables sink takes nftables.syncPeriod"},
	{Name: "ipvs.minSyncPeriod", Class: kpconfig.Ignored, Why: "the nftables sink takes nftables.minSyncPeriod"},
	{Name: "ipvs", Class: kpconfig.Ignored, Why: "another proxy mode's settings (kube-proxy's nftables mode ignores them too)",
		Paths: []string{"ipvs.scheduler", "ipvs.excludeCIDRs", "ipvs.strictARP", "ipvs.tcpTimeout", "ipvs.tcpFinTimeout", "ipvs.udpTimeout"}},
}
