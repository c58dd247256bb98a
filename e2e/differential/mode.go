package differential

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/e2e/cluster"
)

// Where is the kind of node a mode's proxies run on.
type Where int

const (
	// Host is a fresh network namespace of this host (the host kernel has
	// iptables and nf_tables).
	Host Where = iota
	// VM is a fresh real-kernel VM per proxy (e2e/vm): IPVS is not in the
	// host kernel.
	VM
)

// Mode is one kube-proxy mode the sinks are compared in.
type Mode struct {
	// Name is kube-proxy's --proxy-mode.
	Name string
	// Sinks are the sinks compared with kube-proxy: a main package under
	// sinks/ each.
	Sinks []string
	// Where is where the proxies run; it picks the capture.
	Where Where
	// Differences is the reviewed differences file of the broad cluster,
	// under e2e/cluster/testdata; HostileDifferences the hostile
	// cluster's (RunHostile); SettingsDifferences the Settings'
	// (RunSettings), beyond Differences.
	Differences, HostileDifferences, SettingsDifferences string
	// Shapes are the services, beside cluster.BroadShapes, whose rules
	// exist only in this mode.
	Shapes func() []cluster.Shape
	// Capture runs one proxy binary on a fresh node and returns its
	// normalized kernel state.
	Capture func(e *Env, bin string, args ...string) Capture
	// Order, when set, compares the order of the rules within each chain
	// (a capture with Chains).
	Order *Order
	// takeover, when set (a Host mode), is how the mode's kernel is read
	// on a node that kube-proxy leaves to a sink (Run's takeover
	// subtests).
	takeover *hostKernel
}

// Order says which chains' rule order means nothing.
type Order struct {
	// Independent chains' rules may come in any order; LastFixed ones'
	// too, but for their last rule.
	Independent, LastFixed []string
}

// Modes are the modes with a differential, keyed by name.
var Modes = map[string]Mode{
	"ipvs": {
		Name: "ipvs", Sinks: []string{"ipvs-fullstate", "ipvs-incremental"}, Where: VM,
		Differences: "kubeproxy-ipvs-differences.txt", HostileDifferences: "kubeproxy-ipvs-hostile-differences.txt",
		SettingsDifferences: "kubeproxy-ipvs-settings-differences.txt", Shapes: ipvsShapes, Capture: captureVM,
	},
	"iptables": {
		Name: "iptables", Sinks: []string{"iptables"}, Where: Host,
		Differences: "kubeproxy-iptables-differences.txt", HostileDifferences: "kubeproxy-iptables-hostile-differences.txt",
		SettingsDifferences: "kubeproxy-iptables-settings-differences.txt", Shapes: iptablesShapes, Capture: captureHost,
		// Rule order matters within a chain (the statistic probabilities
		// of a KUBE-SVC chain, a KUBE-SEP's masquerade before its DNAT,
		// the postrouting RETURN first); only the service rules of the
		// top-level chains are independent (kube-proxy writes them in map
		// order), but for nat KUBE-SERVICES' last rule, the jump to
		// KUBE-NODEPORTS.
		Order: &Order{
			Independent: []string{"nat KUBE-NODEPORTS", "filter KUBE-SERVICES",
				"filter KUBE-EXTERNAL-SERVICES", "filter KUBE-NODEPORTS", "filter KUBE-PROXY-FIREWALL"},
			LastFixed: []string{"nat KUBE-SERVICES"},
		},
	},
	"nftables": {
		Name: "nftables", Sinks: []string{"nftables"}, Where: Host,
		Differences: "kubeproxy-nftables-differences.txt", HostileDifferences: "kubeproxy-nftables-hostile-differences.txt",
		SettingsDifferences: "kubeproxy-nftables-settings-differences.txt", Shapes: nftablesShapes, Capture: captureNFT,
		// Rule order matters in every chain (kube-proxy writes each
		// chain's rules in a fixed order; services are map elements, not
		// rules of a shared chain).
		Order:    &Order{},
		takeover: &nftKernel,
	},
}

// Sinks maps every sink with a differential to its mode's name.
var Sinks = func() map[string]string {
	out := map[string]string{}
	for name, m := range Modes {
		for _, s := range m.Sinks {
			out[s] = name
		}
	}
	return out
}()

func httpPorts(nodePort int32) []corev1.ServicePort {
	return []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http"), NodePort: nodePort}}
}

// ipvsShapes are the shapes where kube-proxy's IPVS mode has rules of its
// own: a NodePort service with internalTrafficPolicy=Local and no
// endpoint on this node (its cluster IP gets the cluster endpoints), the
// same with both policies Local, and a service whose only endpoint is on
// this node and terminating (the serving-terminating fallback, and its
// KUBE-LOOP-BACK entry).
func ipvsShapes() []cluster.Shape {
	local := corev1.ServiceInternalTrafficPolicyLocal
	return []cluster.Shape{
		{Name: "itp-np-remote", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.12.1", InternalTrafficPolicy: &local, Ports: httpPorts(30096)},
			Pods: []cluster.ShapePod{{Name: "itp-np-remote-b", Node: "node-b", IPs: []string{"10.244.1.40"}}}},
		{Name: "both-local-remote", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.12.2", InternalTrafficPolicy: &local,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: httpPorts(30097)},
			Pods: []cluster.ShapePod{{Name: "both-local-remote-b", Node: "node-b", IPs: []string{"10.244.1.41"}}}},
		{Name: "ipvs-term-only", Spec: corev1.ServiceSpec{ClusterIP: "10.96.12.3", Ports: httpPorts(0)},
			Pods: []cluster.ShapePod{{Name: "ipvs-term-only-a", Node: cluster.BroadNode, IPs: []string{"10.244.0.42"}, Terminating: true}}},
	}
}

// iptablesShapes are the shapes whose iptables rules have no IPVS
// counterpart: a NodePort service without endpoints (REJECT in filter
// KUBE-SERVICES and KUBE-EXTERNAL-SERVICES), a service whose only
// endpoint is terminating but serving (the terminating fallback),
// internalTrafficPolicy=Local with no local endpoint (DROP), and a
// LoadBalancer without source ranges and with eTP=Cluster.
func iptablesShapes() []cluster.Shape {
	iLocal := corev1.ServiceInternalTrafficPolicyLocal
	return []cluster.Shape{
		{Name: "empty", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.11.1", Ports: httpPorts(30090)}},
		{Name: "term-only", Spec: corev1.ServiceSpec{ClusterIP: "10.96.11.2", Ports: httpPorts(0)},
			Pods: []cluster.ShapePod{{Name: "term-only-a", Node: cluster.BroadNode, IPs: []string{"10.244.0.30"}, Terminating: true}}},
		{Name: "itp-remote", Spec: corev1.ServiceSpec{ClusterIP: "10.96.11.3", InternalTrafficPolicy: &iLocal, Ports: httpPorts(0)},
			Pods: []cluster.ShapePod{{Name: "itp-remote-b", Node: "node-b", IPs: []string{"10.244.1.31"}}}},
		{Name: "lb-open", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.11.4", Ports: httpPorts(30091)},
			Ingress: "192.0.2.40", Pods: []cluster.ShapePod{{Name: "lb-open-b", Node: "node-b", IPs: []string{"10.244.1.32"}}}},
	}
}

// nftablesShapes are the iptables mode's shapes (iptablesShapes): their
// rules exist in nftables mode too (the no-endpoint-services and
// no-endpoint-nodeports reject verdicts, the terminating fallback, the
// internalTrafficPolicy=Local drop, a LoadBalancer IP without a
// firewall-ips entry).
func nftablesShapes() []cluster.Shape { return iptablesShapes() }
