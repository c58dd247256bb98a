package node

import (
	"regexp"
	"testing"
	"time"
)

// waitVirtualServer waits up to within for the node's IPVS table to hold
// (present) or lack the virtual server addrPort (TCP), and returns how
// long it took.
func (c *cluster) waitVirtualServer(addrPort string, present bool, within time.Duration) time.Duration {
	c.t.Helper()
	re := regexp.MustCompile(`(?m)^TCP\s+` + regexp.QuoteMeta(addrPort) + `\s`)
	start := time.Now()
	for {
		out := c.node.MustRun(c.t, "ipvsadm", "-Ln")
		if re.MatchString(out) == present {
			return time.Since(start)
		}
		if time.Since(start) > within {
			c.t.Fatalf("virtual server %s present=%v not reached within %s:\n%s\nsink log:\n%s", addrPort, present, within, out, c.sinkLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodeAddressFollow: an IPVS sink started without --node-address
// follows the node's addresses over rtnetlink without a restart: an
// address added to the node's link in --nodeport-addresses gets its
// NodePort virtual server within 2 s and serves the node port to an
// external client, one outside the CIDRs gets none, a removed one loses
// it within 2 s; a restart on the unchanged node writes nothing.
func TestNodeAddressFollow(t *testing.T) {
	requireIPVS(t)
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	ports := []port{{"http", "TCP", 80, 8080, 30081}}
	c.write(nodeManifest, svc{name: "web", typ: "NodePort", clusterIP: "10.96.0.24", ports: ports}.yaml(),
		slice("web", ports, ep{ip: a.ip.String(), ready: true}))
	c.followAddrs = true
	args := []string{"--nodeport-addresses", "192.168.1.0/24"}
	c.startSink(args...)
	c.synced()
	c.expectFrom(c.ext, "tcp", ap("192.168.1.10:30081"), "pod-a")
	c.waitVirtualServer("192.168.2.10:30081", false, 0)

	c.node.MustRun(t, "ip", "addr", "add", "192.168.1.11/24", "dev", "br0")
	c.node.MustRun(t, "ip", "addr", "add", "192.168.3.1/32", "dev", "ext1")
	t.Logf("address added: virtual server after %s", c.waitVirtualServer("192.168.1.11:30081", true, 2*time.Second))
	c.expectFrom(c.ext, "tcp", ap("192.168.1.11:30081"), "pod-a")
	c.node.MustRun(t, "ip", "addr", "del", "192.168.1.11/24", "dev", "br0")
	t.Logf("address removed: virtual server gone after %s", c.waitVirtualServer("192.168.1.11:30081", false, 2*time.Second))
	c.waitVirtualServer("192.168.3.1:30081", false, 0)
	c.waitVirtualServer("192.168.1.10:30081", true, 0)

	c.stopSink()
	c.startSink(args...)
	c.expectNoWrites()
	c.expectFrom(c.ext, "tcp", ap("192.168.1.10:30081"), "pod-a")
}
