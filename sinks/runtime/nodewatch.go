package runtime

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/addrwatch"
)

// nodeAddrs follows what selects where NodePorts are served: the node's
// addresses (--node-address, or the links' as addrwatch follows them) and
// its primary IPs (--bind-address, the Node's addresses).
type nodeAddrs struct {
	c       Config
	local   []netip.Addr
	primary []netip.Addr
	// cur is the selection the controller was last given.
	cur NodePorts
	// watcher follows the links' addresses; nil with --node-address and
	// in a dry run.
	watcher *addrwatch.Watcher
	// due is set when cur changed while a split resync's read ran: the
	// controller gets it after the read.
	due bool
}

// startNodeAddrs lists the node's addresses (--node-address when given,
// else every link's but exclude's) and, with watch, follows their
// changes. In a dry run a failure to list them is not one.
func startNodeAddrs(c Config, exclude []string, watch bool) (*nodeAddrs, error) {
	n := &nodeAddrs{c: c, local: c.NodeAddresses, primary: PrimaryIPs(nil, c.BindAddress)}
	if len(c.NodeAddresses) == 0 {
		var err error
		cfg := addrwatch.Config{Exclude: exclude}
		if watch {
			n.watcher, n.local, err = addrwatch.Watch(cfg)
		} else {
			n.local, err = addrwatch.List(cfg)
		}
		if err != nil && !c.DryRun {
			return nil, err
		}
	}
	n.cur = c.SelectNodePorts(n.local, n.primary)
	return n, nil
}

// close stops following the addresses.
func (n *nodeAddrs) close() {
	if n.watcher != nil {
		n.watcher.Close()
	}
}

// follow delivers the node's addresses on ch each time they change, the
// latest only, until ctx ends; it returns at once without a watcher.
func (n *nodeAddrs) follow(ctx context.Context, ch chan []netip.Addr, log *slog.Logger) {
	if n.watcher == nil {
		return
	}
	err := n.watcher.Run(ctx, func(addrs []netip.Addr) {
		select {
		case <-ch: // replaced by the newer list
		default:
		}
		ch <- addrs
	}, func(err error) { log.Warn("node addresses not listed; retried at the next change", "error", err) })
	if err != nil {
		log.Error("node addresses no longer followed; NodePorts stay on the last ones", "error", err)
	}
}

// setLocal takes the node's addresses and reports whether the selection
// changed.
func (n *nodeAddrs) setLocal(addrs []netip.Addr) bool {
	n.local = addrs
	return n.reselect()
}

// setNode takes the Node a snapshot carries (nil: not read) and reports
// whether the selection changed: the primary IPs follow the Node's, where
// kube-proxy exits when they change.
func (n *nodeAddrs) setNode(node *client.Node) bool {
	if node == nil || !n.c.NodePortPrimary {
		return false
	}
	p := PrimaryIPs(node, n.c.BindAddress)
	if slices.Equal(p, n.primary) {
		return false
	}
	n.primary = p
	return n.reselect()
}

// reselect selects again and reports whether the selection changed.
func (n *nodeAddrs) reselect() bool {
	np := n.c.SelectNodePorts(n.local, n.primary)
	if np.Equal(n.cur) {
		return false
	}
	n.cur = np
	n.due = true
	return true
}

// healthCheckAddresses returns where health-check node ports listen: on
// the node addresses serving NodePorts when --nodeport-addresses narrows
// them, else on every address (kube-proxy's rule). Like kube-proxy, the
// first selection is kept.
func (n *nodeAddrs) healthCheckAddresses() []netip.Addr {
	if len(n.cur.CIDRs) == 0 {
		return nil
	}
	return n.cur.Addrs
}

// nodePortsChanged hands the controller the selection when it changed
// and no split resync's read runs (reading: the caller calls again after
// it), and programs it: with again, by handing the controller its last
// snapshot again.
func (r *running) nodePortsChanged(reading, again bool) {
	n := r.nodes
	if !n.due || reading {
		return
	}
	n.due = false
	r.log.Info("NodePort addresses changed", "nodeport-addresses", n.cur.Addrs, "cidrs", n.cur.CIDRs)
	s, ok := r.ctl.(NodePortsSetter)
	if !ok {
		r.log.Warn("this sink does not follow node address changes: restart it to serve NodePorts on them")
		return
	}
	s.SetNodePorts(n.cur)
	if again && r.last != nil {
		r.ctl.Snapshot(r.last)
	}
}
