package vmtests

import (
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestToolsInVM shows the VM has what every kernel test needs: IPVS driven
// by ipvsadm, ipset, dummy links, and both iptables back ends.
func TestToolsInVM(t *testing.T) {
	t.Parallel()
	script := `set -e
modprobe ip_vs
ipvsadm -A -t 10.96.0.10:53 -s rr
ipvsadm -a -t 10.96.0.10:53 -r 10.244.1.5:8080 -m -w 3
ipvsadm -A -u [fd00::10]:53 -s wrr -p 600
echo '--- ipvsadm'
ipvsadm -Sn
ipset create KUBE-CLUSTER-IP hash:ip,port
ipset add KUBE-CLUSTER-IP 10.96.0.10,udp:53
echo '--- ipset'
ipset save KUBE-CLUSTER-IP
ip link add kube-ipvs0 type dummy
ip addr add 10.96.0.10/32 dev kube-ipvs0
echo '--- ip'
ip -o -4 addr show dev kube-ipvs0
iptables-nft -t nat -N KUBE-SERVICES
iptables-legacy -t nat -N KUBE-SERVICES
echo '--- iptables'
iptables-nft-save -t nat | grep '^:KUBE'
iptables-legacy-save -t nat | grep '^:KUBE'
`
	status, out := vm.RunShell(t, script, vm.Options{})
	if status != 0 {
		t.Fatalf("script failed with status %d", status)
	}
	for _, want := range []string{
		"-A -t 10.96.0.10:53 -s rr",
		"-a -t 10.96.0.10:53 -r 10.244.1.5:8080 -m -w 3",
		"-A -u [fd00::10]:53 -s wrr -p 600",
		"add KUBE-CLUSTER-IP 10.96.0.10,udp:53",
		"kube-ipvs0    inet 10.96.0.10/32 scope global kube-ipvs0",
		":KUBE-SERVICES - [0:0]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("VM output lacks %q", want)
		}
	}
	if n := strings.Count(out, ":KUBE-SERVICES - [0:0]"); n != 2 {
		t.Errorf("KUBE-SERVICES listed %d times, want once per iptables back end", n)
	}
}

// TestStaticGoBinaryInVM runs a static Go test binary in the VM that resolves
// the IPVS generic-netlink family.
func TestStaticGoBinaryInVM(t *testing.T) {
	t.Parallel()
	vm.RunTests(t, "github.com/proxysinks/proxysinks/e2e/kernelprobe", "-test.v")
}
