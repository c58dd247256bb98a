package differential

import (
	"slices"

	"github.com/proxysinks/proxysinks/e2e/cluster"
)

// Setting is a kube-proxy configuration the differential compares beside
// the default one (RunSettings): flags given to kube-proxy and to each
// sink alike, on the broad cluster whose nodes have pod CIDRs
// (BroadPodCIDRs).
type Setting struct {
	// Name names the subtest and, in the settings differences file, the
	// setting ("<sink>/<Name>" patterns).
	Name string
	// Flags are given to kube-proxy and the sinks after the common ones.
	Flags []string
	// NodePortAddresses is --nodeport-addresses; empty leaves it unset
	// (every node address).
	NodePortAddresses string
	// Modes are the modes whose rules the setting changes; empty: all.
	Modes []string
	// Shows, when set, is text a line of kube-proxy's capture must hold:
	// the setting took effect. ShowsIn replaces it for the modes it
	// names (their rules print otherwise: nft's syntax).
	Shows   string
	ShowsIn map[string]string
}

// BroadPodCIDRs are the Node's spec.podCIDRs per node of the broad
// cluster (read by --detect-local-mode=NodeCIDR); the pods of the broad
// shapes have addresses in their node's CIDRs.
var BroadPodCIDRs = map[string][]string{
	cluster.BroadNode: {"10.244.0.0/24", "fd00:244::/64"},
	"node-b":          {"10.244.1.0/24", "fd00:244:1::/64"},
}

// Settings are the configurations that change the rules kube-proxy
// writes, beside the default one of Run (ClusterCIDR detection without a
// cluster CIDR, node ports on cluster.BroadNodeCIDR).
var Settings = []Setting{
	{Name: "cluster-cidr", Flags: []string{"--cluster-cidr=10.244.0.0/16,fd00:244::/48"}, NodePortAddresses: cluster.BroadNodeCIDR, Shows: "! -s 10.244.0.0/16 ",
		ShowsIn: map[string]string{"nftables": "ip saddr != 10.244.0.0/16 "}},
	{Name: "node-cidr", Flags: []string{"--detect-local-mode=NodeCIDR"}, NodePortAddresses: cluster.BroadNodeCIDR, Shows: "! -s 10.244.0.0/24 ",
		ShowsIn: map[string]string{"nftables": "ip saddr != 10.244.0.0/24 "}},
	{Name: "bridge", Flags: []string{"--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0"}, NodePortAddresses: cluster.BroadNodeCIDR, Shows: "! -i cbr0 ",
		ShowsIn: map[string]string{"nftables": `iifname != "cbr0" `}},
	{Name: "if-prefix", Flags: []string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth"}, NodePortAddresses: cluster.BroadNodeCIDR, Shows: "! -i veth+ ",
		ShowsIn: map[string]string{"nftables": `iifname != "veth*" `}},
	// Node ports on every address, localhost included (the default).
	{Name: "localhost-default", Modes: []string{"iptables"}, Shows: "block incoming localnet connections"},
	{Name: "localhost-off", Flags: []string{"--iptables-localhost-nodeports=false"}, Modes: []string{"iptables"}, Shows: "! -d 127.0.0.0/8 "},
	{Name: "localhost-cidr", NodePortAddresses: "127.0.0.0/8," + cluster.BroadNodeCIDR, Modes: []string{"iptables"}, Shows: "-d 127.0.0.1/32 "},
	// Every service's traffic masqueraded (nftables only here: kube-proxy's
	// "masquerade all clusterIP traffic" rule of each service chain).
	{Name: "masquerade-all", Flags: []string{"--masquerade-all"}, NodePortAddresses: cluster.BroadNodeCIDR, Modes: []string{"nftables"},
		Shows: "masquerade all clusterIP traffic"},
	{Name: "primary-bind", Flags: []string{"--bind-address=" + cluster.BroadNodeIP}, NodePortAddresses: "primary"},
	// The primary IP from the Node's InternalIP (no --bind-address). On
	// this node the primary rules are those of BroadNodeCIDR: Shows has
	// nothing to look for.
	{Name: "primary-node", NodePortAddresses: "primary"},
}

// settings returns the settings that change m's rules.
func (m Mode) settings() []Setting {
	var out []Setting
	for _, s := range Settings {
		if len(s.Modes) == 0 || slices.Contains(s.Modes, m.Name) {
			out = append(out, s)
		}
	}
	return out
}

// flags returns the setting's flags for kube-proxy and the sinks.
func (s Setting) flags() []string {
	out := slices.Clone(s.Flags)
	if s.NodePortAddresses != "" {
		out = append(out, "--nodeport-addresses="+s.NodePortAddresses)
	}
	return out
}

// shows returns the text a line of kube-proxy's capture in mode must
// hold once the setting took effect ("" when there is nothing to look
// for).
func (s Setting) shows(mode string) string {
	if text, ok := s.ShowsIn[mode]; ok {
		return text
	}
	return s.Shows
}
