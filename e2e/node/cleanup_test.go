package node

import (
	"strings"
	"testing"
	"time"
)

// TestCleanup: --cleanup removes what the sink programmed (virtual servers,
// kube-ipvs0 and its addresses, the KUBE-* ipsets, the KUBE-* chains and
// jumps) and leaves a foreign virtual server, ipset and chain alone.
func TestCleanup(t *testing.T) {
	requireIPVS(t)
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.node.MustRun(t, "ipvsadm", "-A", "-t", "192.168.1.10:443", "-s", "wlc")
	c.node.MustRun(t, "ipset", "create", "KEEPALIVED-SET", "hash:ip")
	c.node.MustRun(t, "iptables", "-t", "nat", "-N", "FOREIGN-CHAIN")
	c.node.MustRun(t, "iptables", "-t", "nat", "-A", "PREROUTING", "-j", "FOREIGN-CHAIN")
	c.write(nodeManifest, svc{name: "web", typ: "NodePort", clusterIP: "10.96.0.24", ports: web}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.24:80"), "pod-a")
	c.stopSink()

	c.startSink("--cleanup")
	done := make(chan error, 1)
	go func() { done <- c.sink.Wait() }()
	select {
	case err := <-done:
		c.sink = nil
		if err != nil {
			t.Fatalf("--cleanup: %v\n%s", err, c.sinkLog.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("--cleanup did not exit\n%s", c.sinkLog.String())
	}

	if out := c.node.MustRun(t, "ipvsadm", "-Sn"); strings.TrimSpace(out) != "-A -t 192.168.1.10:443 -s wlc" {
		t.Errorf("ipvsadm -Sn after --cleanup, want only the foreign virtual server:\n%s", out)
	}
	sets := c.node.MustRun(t, "ipset", "list", "-n")
	if strings.Contains(sets, "KUBE-") || !strings.Contains(sets, "KEEPALIVED-SET") {
		t.Errorf("ipsets after --cleanup, want KEEPALIVED-SET only:\n%s", sets)
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out := c.node.MustRun(t, tool)
		if strings.Contains(out, "KUBE-") {
			t.Errorf("%s after --cleanup still has KUBE- chains or rules:\n%s", tool, out)
		}
		if tool == "iptables-save" && !strings.Contains(out, "-A PREROUTING -j FOREIGN-CHAIN") {
			t.Errorf("the foreign chain went:\n%s", out)
		}
	}
	if out, err := c.node.Run("ip", "link", "show", "kube-ipvs0"); err == nil {
		t.Errorf("kube-ipvs0 left after --cleanup:\n%s", out)
	}
	c.expectNoAnswer(client.ns, "tcp", ap("10.96.0.24:80"))
}
