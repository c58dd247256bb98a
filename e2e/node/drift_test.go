package node

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Node drift on the real kernel: the pieces Setup prepares (iptables
// rules, their jumps, the IPVS sysctls, kube-ipvs0 with its addresses) are
// repaired at the next resync (--sync-period 3s here), without the
// misleading "file exists" errors a sync over a vanished kube-ipvs0 logged.
func TestNodeDriftRepaired(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.24", ports: web}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.24:80"), "pod-a")
	logBefore := len(c.sinkLog.String())

	c.node.MustRun(t, "iptables", "-t", "nat", "-F", "KUBE-SERVICES")
	jump := ""
	for _, l := range strings.Split(c.node.MustRun(t, "iptables", "-t", "nat", "-S", "POSTROUTING"), "\n") {
		if strings.HasSuffix(l, "-j KUBE-POSTROUTING") {
			jump = l
		}
	}
	if jump == "" {
		t.Fatal("no POSTROUTING jump to KUBE-POSTROUTING after setup")
	}
	c.node.MustRun(t, "sh", "-c", "iptables -t nat "+strings.Replace(jump, "-A ", "-D ", 1))
	c.node.MustRun(t, "sysctl", "-qw", "net.ipv4.vs.conntrack=0")
	c.node.MustRun(t, "ip", "link", "del", "kube-ipvs0")
	c.expectNoAnswer(client.ns, "tcp", ap("10.96.0.24:80"))

	c.expectFrom(client.ns, "tcp", ap("10.96.0.24:80"), "pod-a")
	c.eventually(20*time.Second, func() error {
		nat := c.node.MustRun(t, "iptables-save", "-t", "nat")
		if !strings.Contains(nat, "-A KUBE-SERVICES ") {
			return fmt.Errorf("KUBE-SERVICES still empty:\n%s", nat)
		}
		if !strings.Contains(nat, "-j KUBE-POSTROUTING") {
			return fmt.Errorf("POSTROUTING jump still missing:\n%s", nat)
		}
		if v := strings.TrimSpace(c.node.MustRun(t, "sysctl", "-n", "net.ipv4.vs.conntrack")); v != "1" {
			return fmt.Errorf("net.ipv4.vs.conntrack = %s, want 1", v)
		}
		if out := c.node.MustRun(t, "ip", "-o", "addr", "show", "dev", "kube-ipvs0"); !strings.Contains(out, "10.96.0.24/32") {
			return fmt.Errorf("kube-ipvs0 lacks 10.96.0.24:\n%s", out)
		}
		return nil
	})
	if after := c.sinkLog.String()[logBefore:]; strings.Contains(after, "file exists") {
		t.Errorf("the sink logged \"file exists\" while repairing:\n%s", after)
	}
}
