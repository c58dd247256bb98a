package vmtests

import (
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestKernelPackagesVM runs the kernel tests of every package that talks
// to the kernel itself, on the VM's kernel, in one guest (one boot, the
// packages one after the other), each as a subtest:
//   - kernel, xtables, rules, entry-rules: the dataplane and the host
//     tooling under it (modules, sysctls, iptables back ends and the
//     nf_tables generation, IPVS mode's iptables rules with nft and legacy,
//     IPVS mode's modules and sysctls, the KUBE-IPVS-OUT-FILTER drops that
//     follow set members);
//   - conntrack: flows created through ctnetlink and real DNAT'd UDP flows
//     flushed by target, IPv4 and IPv6, while other flows stay;
//   - ipset: the contract suite (every set type, both families,
//     100,000-entry batches), the protocol-6 run and the ipset CLI
//     cross-check;
//   - ipvs: the contract suite against the real IPVS, the raw transport
//     tests and the ipvsadm cross-check;
//   - link: kube-ipvs0 with 1,000 VIPs bound, listed and unbound (dummy
//     links exist there), node addresses, namespace isolation;
//   - kernelprobe: a static Go test binary resolving the IPVS
//     generic-netlink family;
//   - incremental: the equivalence of the two IPVS sinks: random cluster
//     states with injected failures, drift and restarts, the kernel state
//     read back by both sinks' reader and compared with ipvsadm -Sn, ipset
//     save, ip addr and iptables-save;
//   - tools, last (it changes the initial namespace): the VM has what every
//     kernel test needs: IPVS driven by ipvsadm, ipset, dummy links, and
//     both iptables back ends.
//
// The packages' kernel tests each work in network namespaces of their own.
func TestKernelPackagesVM(t *testing.T) {
	t.Parallel()
	const mod = "github.com/proxysinks/proxysinks/"
	res := vm.RunSuites(t, vm.Options{},
		vm.Suite{Pkg: mod + "host/kernel", Args: []string{"-test.v"}},
		vm.Suite{Pkg: mod + "host/xtables", Args: []string{"-test.v"}},
		vm.Suite{Pkg: mod + "dataplane/rules", Args: []string{"-test.v"}},
		vm.Suite{Name: "entry-rules", Pkg: mod + "dataplane", Args: []string{"-test.v", "-test.run", "EntryRules|IPVSSetupKernel"}},
		vm.Suite{Pkg: mod + "host/conntrack", Args: []string{"-test.run", "Kernel", "-test.v"}},
		vm.Suite{Pkg: mod + "netlinkraw/ipset", Args: []string{"-test.run", "Kernel|CLI", "-test.v"}},
		vm.Suite{Pkg: mod + "netlinkraw/ipvs", Args: []string{"-test.run", "Kernel", "-test.v"}},
		vm.Suite{Pkg: mod + "netlinkraw/link", Args: []string{"-test.v"}},
		vm.Suite{Pkg: mod + "e2e/kernelprobe", Args: []string{"-test.v"}},
		vm.Suite{Pkg: mod + "incremental", Args: []string{"-test.v", "-test.run", "EquivalenceKernel"}},
		vm.Suite{Name: "tools", Command: toolsScript},
	)
	tools := res["tools"]
	if !tools.Done {
		return
	}
	for _, want := range []string{
		"-A -t 10.96.0.10:53 -s rr",
		"-a -t 10.96.0.10:53 -r 10.244.1.5:8080 -m -w 3",
		"-A -u [fd00::10]:53 -s wrr -p 600",
		"add KUBE-CLUSTER-IP 10.96.0.10,udp:53",
		"kube-ipvs0    inet 10.96.0.10/32 scope global kube-ipvs0",
		":KUBE-SERVICES - [0:0]",
	} {
		if !strings.Contains(tools.Output, want) {
			t.Errorf("tools: VM output lacks %q", want)
		}
	}
	if n := strings.Count(tools.Output, ":KUBE-SERVICES - [0:0]"); n != 2 {
		t.Errorf("tools: KUBE-SERVICES listed %d times, want once per iptables back end", n)
	}
}

// toolsScript drives the VM's tools by hand: ipvsadm, ipset, a dummy
// link, both iptables back ends.
const toolsScript = `set -e
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
