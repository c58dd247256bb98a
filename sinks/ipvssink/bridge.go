package ipvssink

import (
	"os"
	"path/filepath"
	"strings"
)

// bridgeCallIPTables is the sysctl that makes bridged IPv4 frames pass the
// iptables hooks, and with them IPVS (br_netfilter; per network namespace).
const bridgeCallIPTables = "net/bridge/bridge-nf-call-iptables"

// bridgeWarning returns why pods on a bridge may not be served correctly,
// or "" when bridged frames reach netfilter. procSys is normally
// /proc/sys. Without br_netfilter, a backend's reply to a client pod on the
// same bridge is bridged straight to the client, never un-NATed by IPVS,
// and the client drops it; kube-proxy's IPVS mode warns about the same
// thing. It is a warning, not an error: a routed CNI does not need it.
func bridgeWarning(procSys string) string {
	data, err := os.ReadFile(filepath.Join(procSys, bridgeCallIPTables))
	switch {
	case os.IsNotExist(err):
		return "br_netfilter is not loaded (no " + bridgeCallIPTables + "): with a bridge CNI, pods will not get replies from service backends on the same bridge; run modprobe br_netfilter"
	case err != nil:
		return "cannot read " + bridgeCallIPTables + ": " + err.Error()
	case strings.TrimSpace(string(data)) != "1":
		return bridgeCallIPTables + " is not 1: with a bridge CNI, pods will not get replies from service backends on the same bridge; run sysctl -w net.bridge.bridge-nf-call-iptables=1"
	}
	return ""
}
