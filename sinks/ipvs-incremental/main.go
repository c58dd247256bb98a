// Command ipvs-incremental is the IPVS incremental sink: it runs on every
// node in place of kube-proxy's IPVS mode, like ipvs-fullstate, with the
// same flags, endpoints, dry run and metrics. It renders only the services
// that changed since the last sync and writes their delta, so a change
// costs what the change costs, whatever the size of the cluster.
//
//	ipvs-incremental --kubeconfig ~/.kube/config
//	ipvs-incremental --from-file examples/cluster --dry-run
package main

import (
	"io"
	"os"

	"github.com/proxysinks/proxysinks/sinks/ipvssink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

var sink = ipvssink.Sink("ipvs-incremental",
	"Kubernetes service proxy programming IPVS, ipset and iptables from incremental events", ipvssink.Incremental)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command line args, printing to stdout (dry-run output) and
// stderr (logs), and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runtime.Main(sink, args, stdout, stderr)
}
