package node

import (
	"flag"
	"strings"
	"testing"
)

var (
	sinkFlag       = flag.String("sink", "ipvs-fullstate", "the sink under test, a key of node.Sinks (fullstate and incremental name the IPVS sinks); its binary is found on $PATH")
	sinkBinFlag    = flag.String("sink-bin", "", "the sink's binary (default: -sink on $PATH)")
	sinkArgsFlag   = flag.String("sink-args", "", "extra flags for every sink started, space-separated")
	kubeconfigFlag = flag.String("kubeconfig", "", "admin kubeconfig of a control plane (e2e/cluster) reachable from the VM: the cases run against its API instead of manifest files")
	sinkKCFlag     = flag.String("sink-kubeconfig", "", "with -kubeconfig: the sink's kubeconfig, its server "+"https://"+nodeAPIAddr+" (a relay in the node's namespace)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	Use(Options{Sink: *sinkFlag, Bin: *sinkBinFlag, SinkArgs: strings.Fields(*sinkArgsFlag),
		Kubeconfig: *kubeconfigFlag, SinkKubeconfig: *sinkKCFlag})
	Main(m)
}

// TestTraffic runs the traffic case table (Cases) against the sink of
// -sink: in the VM for the IPVS sinks (e2e/vmtests), in fresh network
// namespaces of the host for the others (e2e/hostnode runs the iptables
// sink's).
func TestTraffic(t *testing.T) {
	RunCases(t)
}
