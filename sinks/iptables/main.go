// Command iptables is the iptables sink: it runs on every node in place of
// kube-proxy's iptables mode, programming the same chains with the same
// names through iptables-restore (partial syncs of the services that
// changed, a full sync every --sync-period that repairs drift).
//
//	iptables --kubeconfig ~/.kube/config
//	iptables --from-file examples/cluster --dry-run
//	iptables --cleanup
package main

import (
	"io"
	"os"

	"github.com/proxysinks/proxysinks/sinks/iptablessink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

var sink = iptablessink.Sink("iptables",
	"Kubernetes service proxy programming kube-proxy's iptables-mode rules")

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command line args, printing to stdout (dry-run output) and
// stderr (logs), and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runtime.Main(sink, args, stdout, stderr)
}
