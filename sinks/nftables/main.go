// Command nftables is the nftables sink: it runs on every node in place of
// kube-proxy's nftables mode, programming the same tables (ip and ip6
// kube-proxy) with the same chains, sets and maps, written as nf_tables
// transactions over netlink: each sync commits only what differs from the
// kernel, and the kernel is read back only when another writer committed.
//
//	nftables --kubeconfig ~/.kube/config
//	nftables --from-file examples/cluster --dry-run
//	nftables --cleanup
package main

import (
	"io"
	"os"

	"github.com/proxysinks/proxysinks/sinks/nftablessink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

var sink = nftablessink.Sink("nftables",
	"Kubernetes service proxy programming kube-proxy's nftables-mode ruleset")

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command line args, printing to stdout (dry-run output) and
// stderr (logs), and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runtime.Main(sink, args, stdout, stderr)
}
