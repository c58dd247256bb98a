package node

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/dataplane"
	kcluster "github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/host/kernel"
)

// kernelState is the node's kernel state as the sink and a foreign owner
// leave it: every virtual server, ipset, kube-ipvs0 address, iptables and
// ip6tables rule (rules in their order within each chain; counters and
// comments dropped, as cluster.Normalize compares them) and the IPVS
// sysctls.
type kernelState map[string][]string

// kernel reads the node's kernel state.
func (c *cluster) kernel() kernelState {
	t := c.t
	st := kernelState{}
	for _, s := range []struct{ section, cmd string }{
		{kcluster.SectionIPVS, "ipvsadm -Sn"},
		{kcluster.SectionIPSet, "ipset save"},
		{kcluster.SectionAddrs, "ip -o addr show dev kube-ipvs0 2>/dev/null; true"},
		{kcluster.SectionIPTables, "iptables-save"},
		{kcluster.SectionIP6, "ip6tables-save"},
	} {
		out := c.node.MustRun(t, "sh", "-c", s.cmd)
		st[s.section] = kcluster.Normalize(s.section, out, false)
		if s.section == kcluster.SectionIPTables || s.section == kcluster.SectionIP6 {
			chains := kcluster.Chains(s.section, out, false)
			for _, k := range sortedKeys(chains) {
				st[s.section+" order"] = append(st[s.section+" order"], strings.Join(chains[k], " | "))
			}
		}
	}
	v, err := kernel.Running()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range dataplane.IPVSSysctls(v, false) {
		out := c.node.MustRun(t, "sysctl", "-n", strings.ReplaceAll(s.Name, "/", "."))
		st["sysctl"] = append(st["sysctl"], s.Name+"="+strings.TrimSpace(out))
	}
	return st
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// syncs returns how many syncs the sink has finished, successful or not
// (a resync counts), from its metrics.
func (c *cluster) syncs() float64 {
	v, _ := c.metric("kubeproxy_sync_proxy_rules_duration_seconds_count")
	return v
}

// lastSync returns the time of the sink's last successful sync, from its
// metrics (zero before the first).
func (c *cluster) lastSync() float64 {
	v, _ := c.metric("kubeproxy_sync_proxy_rules_last_timestamp_seconds")
	return v
}

// waitSyncs waits until the sink has finished n more syncs than at the
// call, within limit, and returns how long that took.
func (c *cluster) waitSyncs(n int, limit time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	last := c.syncs()
	for n > 0 {
		if time.Since(start) > limit {
			c.t.Fatalf("the sink did not sync %d more times within %v", n, limit)
		}
		time.Sleep(50 * time.Millisecond)
		if v := c.syncs(); v > last {
			n -= int(v - last)
			last = v
		}
	}
	return time.Since(start)
}

// repairedByNextResync waits for the first resync that starts after the
// call to finish (the second sync to finish from now: one may be under way
// already), which must come within one --sync-period plus what two syncs
// take (limit), and then requires the kernel state to equal want.
func (c *cluster) repairedByNextResync(limit time.Duration, want kernelState) time.Duration {
	c.t.Helper()
	took := c.waitSyncs(2, limit)
	if diff := cmp.Diff(want, c.kernel()); diff != "" {
		c.t.Fatalf("kernel state not repaired by the first resync after the change (-want +got):\n%s", diff)
	}
	return took
}

// deleteJumps is shell code deleting every rule of the nat table's chain
// that jumps to target.
func deleteJumps(chain, target string) string {
	return fmt.Sprintf("iptables -t nat -S %s | grep -- '-j %s' | sed 's/^-A/-D/' | while read -r rule; do eval iptables -t nat $rule; done", chain, target)
}

// TestHostileKernel: an operator, or another program, changes the real
// kernel state of a running sink. Each case does one hostile thing; the
// sink must put its own objects back as they were (compared with
// ipvsadm -Sn, ipset save, the kube-ipvs0 addresses, iptables-save and
// ip6tables-save in rule order, and the IPVS sysctls) by the first resync
// that starts after the change (which comes within one --sync-period),
// traffic must flow again, and foreign objects (a virtual server with a destination,
// an ipset with a member, an iptables chain with a jump to it: created
// before the sink started, and more added while it runs) are left exactly
// as their owner left them. The cases run in order on one node and one
// sink; each starts from the repaired state of the one before.
func TestHostileKernel(t *testing.T) {
	requireIPVS(t)
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	run := func(script string) { c.node.MustRun(c.t, "sh", "-ec", script) }
	// Foreign objects, there before the sink.
	const foreignVS = `ipvsadm -A -t 192.168.1.10:443 -s wlc
ipvsadm -a -t 192.168.1.10:443 -r 192.168.1.100:443 -m`
	run(foreignVS + `
ipset create KEEPALIVED-SET hash:ip
ipset add KEEPALIVED-SET 192.168.1.100
iptables -t nat -N FOREIGN-CHAIN
iptables -t nat -A FOREIGN-CHAIN -s 192.168.9.0/24 -j RETURN
iptables -t nat -A PREROUTING -j FOREIGN-CHAIN`)
	np := []port{{"http", "TCP", 80, 8080, 30080}}
	c.write(nodeManifest, svc{name: "web", typ: "NodePort", clusterIP: "10.96.0.25", ports: np}.yaml(),
		slice("web", np, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	// Setup runs iptables-restore several times, which takes long on a
	// loaded machine: wait for the first sync before asking for traffic.
	c.eventually(20*syncPeriod, func() error {
		if c.syncs() == 0 {
			return fmt.Errorf("no sync yet")
		}
		return nil
	})
	vip := ap("10.96.0.25:80")
	c.expectFrom(client.ns, "tcp", vip, "pod-a")
	// The first resync after a change starts within one --sync-period.
	// The limit only bounds the wait for it (the sync under way and that
	// resync, whose repair runs iptables-save and iptables-restore, may
	// each take seconds on a loaded machine); what is asserted exactly is
	// the state after it.
	const repairLimit = 10 * syncPeriod
	// The settled state: a resync after the first sync.
	c.waitSyncs(2, repairLimit)
	want := c.kernel()
	if !strings.Contains(strings.Join(want[kcluster.SectionIPVS], "\n"), "10.96.0.25:80") {
		t.Fatalf("the sink's virtual server is missing from the settled state:\n%v", want)
	}

	cases := []struct {
		name string
		// act does the hostile thing (and, where it hit a foreign object
		// too, restores that object as its owner would).
		act string
		// frozen stops the sink (SIGSTOP) while act runs, for changes in
		// several steps that a resync in between would undo (a set cannot
		// be destroyed once a repaired rule uses it again).
		frozen bool
	}{
		{"ipvsadm -C", "ipvsadm -C\n" + foreignVS, false},
		{"delete a destination", "ipvsadm -d -t 10.96.0.25:80 -r " + a.ip.String() + ":8080", false},
		{"delete a virtual server", "ipvsadm -D -t 10.96.0.25:80", false},
		{"delete the node-port virtual server", "ipvsadm -D -t 192.168.1.10:30080", false},
		{"change a virtual server's scheduler", "ipvsadm -E -t 10.96.0.25:80 -s sh", false},
		{"change a destination's weight", "ipvsadm -e -t 10.96.0.25:80 -r " + a.ip.String() + ":8080 -m -w 7", false},
		{"delete kube-ipvs0", "ip link del kube-ipvs0", false},
		{"delete an address of kube-ipvs0", "ip addr del 10.96.0.25/32 dev kube-ipvs0", false},
		{"flush KUBE-CLUSTER-IP", "ipset flush KUBE-CLUSTER-IP", false},
		{"delete a member of KUBE-CLUSTER-IP", "ipset del KUBE-CLUSTER-IP 10.96.0.25,tcp:80", false},
		{"flush KUBE-NODE-PORT-TCP", "ipset flush KUBE-NODE-PORT-TCP", false},
		{"destroy the ownership records", "ipset destroy KUBE-PROXYSINKS-VS", false},
		{"flush KUBE-SERVICES", "iptables -t nat -F KUBE-SERVICES", false},
		{"flush every KUBE-* chain of nat", "for ch in $(iptables -t nat -S | awk '$1 == \"-N\" && $2 ~ /^KUBE-/ {print $2}'); do iptables -t nat -F $ch; done", false},
		{"flush KUBE-FORWARD", "iptables -t filter -F KUBE-FORWARD", false},
		{"delete the jump to KUBE-POSTROUTING", deleteJumps("POSTROUTING", "KUBE-POSTROUTING"), false},
		{"delete the jumps to KUBE-SERVICES", deleteJumps("PREROUTING", "KUBE-SERVICES") + "\n" + deleteJumps("OUTPUT", "KUBE-SERVICES"), false},
		{"flush every KUBE-* chain and destroy every KUBE-* set", `for t in nat filter; do
  for ch in $(iptables -t $t -S | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do iptables -t $t -F $ch; done
done
for s in $(ipset list -n | grep '^KUBE-' | grep -v '^KUBE-6-'); do ipset destroy $s; done`, true},
		{"reset the IPVS sysctls", "sysctl -qw net.ipv4.vs.conntrack=0 net.ipv4.vs.expire_nodest_conn=0 net.ipv4.vs.expire_quiescent_template=0", false},
	}
	parent := t
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			defer func() { c.t = parent }()
			logBefore := len(c.sinkLog.String())
			if tc.frozen {
				if err := c.sink.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			}
			run(tc.act)
			if tc.frozen {
				if err := c.sink.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
			took := c.repairedByNextResync(repairLimit, want)
			t.Logf("repaired by the resync %v after the change", took.Round(10*time.Millisecond))
			c.expectFrom(client.ns, "tcp", vip, "pod-a")
			if after := c.sinkLog.String()[logBefore:]; strings.Contains(after, "file exists") {
				t.Errorf("the sink logged \"file exists\" while repairing:\n%s", after)
			}
		})
	}

	t.Run("foreign objects added while the sink runs", func(t *testing.T) {
		c.t = t
		defer func() { c.t = parent }()
		run(`ipvsadm -A -u 192.168.1.10:53 -s rr
ipvsadm -a -u 192.168.1.10:53 -r 192.168.1.100:53 -m
ipvsadm -a -t 10.96.0.25:80 -r 192.168.1.100:80 -m
ipset create FOREIGN-2 hash:net
ipset add FOREIGN-2 192.168.9.0/24
iptables -t filter -N FOREIGN-FILTER
iptables -t filter -A FOREIGN-FILTER -s 192.168.9.0/24 -j DROP
iptables -t filter -I INPUT -j FOREIGN-FILTER`)
		with := c.kernel()
		c.waitSyncs(2, repairLimit)
		got := c.kernel()
		// A destination added by hand to the sink's own virtual server is
		// the sink's to remove; the foreign objects stay as they are.
		with[kcluster.SectionIPVS] = slices.DeleteFunc(with[kcluster.SectionIPVS], func(l string) bool { return l == "-a -t 10.96.0.25:80 -r 192.168.1.100:80 -m -w 1" })
		if diff := cmp.Diff(with, got); diff != "" {
			t.Errorf("after two resyncs with foreign objects added (-want +got):\n%s", diff)
		}
		run(`ipvsadm -D -u 192.168.1.10:53
ipset destroy FOREIGN-2
iptables -t filter -D INPUT -j FOREIGN-FILTER
iptables -t filter -F FOREIGN-FILTER
iptables -t filter -X FOREIGN-FILTER`)
		c.repairedByNextResync(repairLimit, want)
	})

	t.Run("kill -9 and restart", func(t *testing.T) {
		c.t = t
		defer func() { c.t = parent }()
		if err := c.sink.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.sink.Wait()
		c.sink = nil
		c.startSink()
		c.eventually(10*syncPeriod, func() error {
			if c.lastSync() == 0 {
				return fmt.Errorf("no sync yet")
			}
			return nil
		})
		if v, err := c.metric("proxysinks_kernel_operations_total"); err != nil || v != 0 {
			t.Errorf("restarted sink: %v kernel operations (%v), want 0", v, err)
		}
		if diff := cmp.Diff(want, c.kernel()); diff != "" {
			t.Errorf("kernel state after the restart (-want +got):\n%s", diff)
		}
		c.expectFrom(client.ns, "tcp", vip, "pod-a")
	})

	t.Run("every service removed", func(t *testing.T) {
		c.t = t
		defer func() { c.t = parent }()
		c.write(nodeManifest)
		c.expectNoAnswer(client.ns, "tcp", vip)
		c.waitSyncs(1, repairLimit)
		got := c.kernel()
		if diff := cmp.Diff([]string{"-A -t 192.168.1.10:443 -s wlc", "-a -t 192.168.1.10:443 -r 192.168.1.100:443 -m -w 1"}, got[kcluster.SectionIPVS]); diff != "" {
			t.Errorf("virtual servers with no service, want only the foreign one (-want +got):\n%s", diff)
		}
		if !slices.Contains(got[kcluster.SectionIPSet], "add KEEPALIVED-SET 192.168.1.100") {
			t.Errorf("the foreign ipset's member is gone:\n%v", got[kcluster.SectionIPSet])
		}
		if !slices.Contains(got[kcluster.SectionIPTables], "nat -A PREROUTING -j FOREIGN-CHAIN") ||
			!slices.Contains(got[kcluster.SectionIPTables], "nat -A FOREIGN-CHAIN -s 192.168.9.0/24 -j RETURN") {
			t.Errorf("the foreign chain or its jump is gone:\n%v", got[kcluster.SectionIPTables])
		}
	})
}
