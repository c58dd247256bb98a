// Command ipvs-fullstate is the IPVS full-state sink: it runs on every node
// in place of kube-proxy's IPVS mode. On every snapshot of the cluster it
// renders every kernel object the node needs and writes only what changed.
//
//	ipvs-fullstate --kubeconfig ~/.kube/config
//	ipvs-fullstate --from-file examples/cluster --dry-run
package main

import (
	"io"
	"os"

	"github.com/proxysinks/proxysinks/sinks/ipvssink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

var sink = ipvssink.Sink("ipvs-fullstate",
	"Kubernetes service proxy programming IPVS, ipset and iptables from full-state snapshots", ipvssink.FullState)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command line args, printing to stdout (dry-run output) and
// stderr (logs), and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runtime.Main(sink, args, stdout, stderr)
}
