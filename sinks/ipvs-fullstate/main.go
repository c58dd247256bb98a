// Command ipvs-fullstate is the IPVS full-state sink: it runs on every node
// in place of kube-proxy's IPVS mode. On every snapshot of the cluster it
// renders every kernel object the node needs and writes only what changed.
//
//	ipvs-fullstate --kubeconfig ~/.kube/config
//	ipvs-fullstate --from-file examples/cluster --dry-run
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/proxysinks/proxysinks/sinks/ipvssink"
	"github.com/urfave/cli/v2"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command line args, printing to stdout (dry-run output) and
// stderr (logs), and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:           "ipvs-fullstate",
		Usage:          "Kubernetes service proxy programming IPVS, ipset and iptables from full-state snapshots",
		Flags:          ipvssink.Flags(),
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {},
		Action: func(c *cli.Context) error {
			cfg, err := ipvssink.FromContext(c)
			if err != nil {
				return cli.Exit("ipvs-fullstate: "+err.Error(), 2)
			}
			log := cfg.Logger(stderr)
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := ipvssink.Run(ctx, cfg, "ipvs", ipvssink.FullState, stdout, log); err != nil {
				return cli.Exit("ipvs-fullstate: "+err.Error(), 1)
			}
			return nil
		},
	}
	if err := app.RunContext(context.Background(), args); err != nil {
		fmt.Fprintln(stderr, err)
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			return ec.ExitCode()
		}
		return 1
	}
	return 0
}
