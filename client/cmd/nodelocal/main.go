// Command nodelocal prints what one node must serve, computed by the client
// module's sources: from manifest files (the file source) or from a cluster
// (the kube source). It is the client module's runnable example and a
// debugging aid.
//
//	nodelocal -node-name node-1 ../examples/cluster          # one snapshot
//	nodelocal -node-name node-1 -watch ../examples/cluster   # and every change
//	nodelocal -node-name node-1 -events -watch ../examples/cluster
//	nodelocal -node-name "$(hostname)" -kubeconfig ~/.kube/config -watch
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/client/source/kube"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nodelocal:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("nodelocal", flag.ContinueOnError)
	nodeName := fs.String("node-name", "", "this node's name (endpoints on it are local)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; without it and without a path, the in-cluster config")
	watch := fs.Bool("watch", false, "keep running and print every change")
	events := fs.Bool("events", false, "print incremental events instead of snapshots")
	minInterval := fs.Duration("min-interval", time.Second, "shortest time between two snapshots")
	if err := fs.Parse(args); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var deliver func(*client.Snapshot)
	if *events {
		ev := diff.NewEvents(&printer{out: out})
		deliver = ev.Apply
	} else {
		deliver = client.ToCallback(func(ch <-chan *client.ServiceEndpoints) {
			fmt.Fprintln(out, "--- snapshot")
			for se := range ch {
				printService(out, se)
			}
		})
	}
	if !*watch {
		inner := deliver
		ctx2, cancel := context.WithCancel(ctx)
		defer cancel()
		ctx = ctx2
		deliver = func(s *client.Snapshot) { inner(s); cancel() }
	}

	var src client.Source
	if path := fs.Arg(0); path != "" {
		src = file.New(file.Config{Path: path, NodeName: *nodeName, MinInterval: *minInterval})
	} else {
		k, err := kube.NewForConfig(*kubeconfig, kube.Config{NodeName: *nodeName, MinInterval: *minInterval})
		if err != nil {
			return err
		}
		src = k
	}
	if err := src.Run(ctx, deliver); err != nil {
		return err
	}
	for _, e := range src.Errors() {
		fmt.Fprintln(os.Stderr, "invalid:", e)
	}
	return nil
}

func printService(out io.Writer, se *client.ServiceEndpoints) {
	fmt.Fprintln(out, describeService(se.Service))
	for _, e := range se.Endpoints {
		fmt.Fprintln(out, "   ", describeEndpoint(e))
	}
}

func describeService(s *client.Service) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.Key(), s.Type)
	list := func(name string, ips client.IPs) {
		if ips.Len() > 0 {
			fmt.Fprintf(&b, " %s=%v", name, ips.All())
		}
	}
	list("cluster", s.ClusterIPs)
	list("external", s.ExternalIPs)
	list("lb", s.LoadBalancerIPs)
	for _, p := range s.Ports {
		target := fmt.Sprint(p.TargetPort)
		if p.TargetPortName != "" {
			target = p.TargetPortName
		}
		fmt.Fprintf(&b, " %s/%s:%d", p.Name, p.Protocol, p.Port)
		if p.NodePort != 0 {
			fmt.Fprintf(&b, "(node %d)", p.NodePort)
		}
		fmt.Fprintf(&b, "->%s", target)
	}
	if s.SessionAffinity != nil {
		fmt.Fprintf(&b, " affinity=%ds", s.SessionAffinity.TimeoutSeconds)
	}
	if s.ExternalTrafficLocal {
		b.WriteString(" eTP=Local")
	}
	if s.InternalTrafficLocal {
		b.WriteString(" iTP=Local")
	}
	if s.HealthCheckNodePort != 0 {
		fmt.Fprintf(&b, " healthCheck=%d", s.HealthCheckNodePort)
	}
	if len(s.LoadBalancerSourceRanges) > 0 {
		fmt.Fprintf(&b, " sourceRanges=%v", s.LoadBalancerSourceRanges)
	}
	return b.String()
}

func describeEndpoint(e *client.Endpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v", e.Key, e.IPs.All())
	for _, f := range []struct {
		on   bool
		name string
	}{{e.Local, "local"}, {e.Ready, "ready"}, {e.Serving, "serving"}, {e.Terminating, "terminating"},
		{e.Internal, "internal"}, {e.External, "external"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	if e.NodeName != "" {
		b.WriteString(" node=" + e.NodeName)
	}
	for _, p := range e.PortOverrides {
		fmt.Fprintf(&b, " %s/%s=%d", p.Name, p.Protocol, p.Port)
	}
	return b.String()
}

// printer is a client.Sink that prints events.
type printer struct{ out io.Writer }

func (p *printer) SetService(s *client.Service) {
	fmt.Fprintln(p.out, "SetService", describeService(s))
}

func (p *printer) DeleteService(k client.ServiceKey) { fmt.Fprintln(p.out, "DeleteService", k) }

func (p *printer) SetEndpoint(k client.ServiceKey, e *client.Endpoint) {
	fmt.Fprintln(p.out, "SetEndpoint", k, describeEndpoint(e))
}

func (p *printer) DeleteEndpoint(k client.ServiceKey, key client.EndpointKey) {
	fmt.Fprintln(p.out, "DeleteEndpoint", k, key)
}

func (p *printer) Sync() { fmt.Fprintln(p.out, "Sync") }
