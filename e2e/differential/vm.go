package differential

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// vmScript runs the proxy ($PROXY with its arguments) on a node with the
// address cluster.BroadNodeIP, waits until its kernel state has stopped
// changing for 8 s (at most 5 min), and prints the capture.
const vmScript = `for m in ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh nf_conntrack; do modprobe $m; done
ip link add node0 type dummy && ip addr add ` + cluster.BroadNodeIP + `/24 dev node0 && ip link set node0 up
proxy "$@" > /tmp/proxy.log 2>&1 &
pid=$!
state() { ipvsadm -Sn; ipset save; ip -o addr show dev kube-ipvs0 2>/dev/null; iptables-save | grep -v '^[#:]' | sed 's/\[[0-9:]*\]//g'; ip6tables-save | grep -v '^[#:]' | sed 's/\[[0-9:]*\]//g'; }
prev= stable=0 i=0
while [ $i -lt 150 ]; do
	sleep 2; i=$((i+1))
	kill -0 $pid 2>/dev/null || { echo "proxy exited"; cat /tmp/proxy.log; exit 1; }
	cur=$(state | md5sum)
	if [ "$cur" = "$prev" ] && [ -n "$(ipvsadm -Sn)" ]; then stable=$((stable+1)); else stable=0; fi
	prev=$cur
	[ $stable -ge 4 ] && break
done
echo "state stable after $((i*2)) s"
` + cluster.CaptureScript + `
echo "=== proxy log (tail)"
tail -n 40 /tmp/proxy.log
kill $pid
`

// captureVM runs one proxy binary in a fresh VM with a NIC reaching the
// cluster's apiserver and returns its kernel state (IPVS, ipsets,
// kube-ipvs0 addresses, iptables and ip6tables without comments,
// counters or order: cluster.ParseCapture).
func captureVM(e *Env, bin string, args ...string) Capture {
	t := e.T
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	script := strings.Replace(vmScript, `proxy "$@"`, "proxy "+strings.Join(quoted, " "), 1)
	start := time.Now()
	status, out := vm.RunShell(t, script, vm.Options{
		Files:    map[string]string{"proxy": bin},
		WorkDir:  e.Work,
		MemoryMB: 3072,
		Timeout:  12 * time.Minute,
		NIC:      &vm.NIC{Forwards: []vm.Forward{{Guest: cluster.GuestAPIAddr, Host: fmt.Sprintf("127.0.0.1:%d", e.Cluster.APIPort)}}},
	})
	if status != 0 {
		t.Fatalf("%s in the VM: exit status %d", filepath.Base(bin), status)
	}
	st, err := cluster.ParseCapture(out)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(bin), err)
	}
	t.Logf("%s: VM run %s", filepath.Base(bin), time.Since(start).Round(time.Second))
	return Capture{State: st, Synced: len(st[cluster.SectionIPVS]) > 0, Writes: -1}
}
