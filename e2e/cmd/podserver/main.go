// Command podserver is the demo's and manual tests' backend pod and client
// (package netexec): `podserver serve NAME PORT` answers every request with
// NAME and the client address it saw over TCP, UDP and SCTP; `podserver get
// PROTO ADDR:PORT` sends one request and prints the answer.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/proxysinks/proxysinks/e2e/netexec"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: podserver serve NAME PORT | podserver get tcp|udp|sctp ADDR:PORT")
	os.Exit(2)
}

func main() {
	if len(os.Args) != 4 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		port, err := strconv.Atoi(os.Args[3])
		if err != nil || port <= 0 || port > 65535 {
			fmt.Fprintf(os.Stderr, "podserver: bad port %q\n", os.Args[3])
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		if err := netexec.Serve(ctx, os.Args[2], port); err != nil {
			fmt.Fprintln(os.Stderr, "podserver:", err)
			os.Exit(1)
		}
	case "get":
		to, err := netip.ParseAddrPort(os.Args[3])
		if err != nil {
			fmt.Fprintf(os.Stderr, "podserver: bad address %q\n", os.Args[3])
			os.Exit(2)
		}
		r, err := netexec.Get(os.Args[2], to, 3*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "podserver:", err)
			os.Exit(1)
		}
		fmt.Printf("%s answered (it saw the client as %s)\n", r.Name, r.Client)
	default:
		usage()
	}
}
