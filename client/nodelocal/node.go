package nodelocal

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxysinks/proxysinks/client"
)

// Node is what the node-local rules need to know about this node.
type Node struct {
	// Name is this node's name, as EndpointSlices give it in nodeName.
	Name string
	// Zone is this node's topology.kubernetes.io/zone label, if any.
	Zone string
}

// NodeFrom returns the Node facts of a Node object.
func NodeFrom(n *corev1.Node) Node {
	return Node{Name: n.Name, Zone: n.Labels[LabelTopologyZone]}
}

// ConvertNode returns the addresses and pod CIDRs of a Node object (what
// Snapshot.Node holds). An address or CIDR that does not parse is left out
// and named by the returned *client.ObjectError; the others are kept.
func ConvertNode(n *corev1.Node) (*client.Node, error) {
	out := &client.Node{Name: n.Name}
	var bad []fieldError
	for i, a := range n.Status.Addresses {
		t := client.NodeAddressType(a.Type)
		if t != client.NodeInternalIP && t != client.NodeExternalIP {
			continue
		}
		ip, _, err := parseIP(a.Address)
		if err != nil {
			bad = append(bad, fieldError{fmt.Sprintf("status.addresses[%d].address", i), err})
			continue
		}
		out.Addresses = append(out.Addresses, client.NodeAddress{Type: t, Addr: ip.Unmap()})
	}
	cidrs, field := n.Spec.PodCIDRs, "spec.podCIDRs"
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs, field = []string{n.Spec.PodCIDR}, "spec.podCIDR"
	}
	for i, c := range cidrs {
		p, _, err := parseCIDR(strings.TrimSpace(c))
		if err != nil {
			bad = append(bad, fieldError{fmt.Sprintf("%s[%d]", field, i), err})
			continue
		}
		out.PodCIDRs = append(out.PodCIDRs, p)
	}
	if len(bad) > 0 {
		field, err := fieldsError("", bad)
		return out, &client.ObjectError{Kind: "Node", Name: n.Name, Field: field, Err: fmt.Errorf("%w (skipped; the other addresses and CIDRs are kept)", err)}
	}
	return out, nil
}

// SetNode updates this node's facts from its Node object; Node objects of
// other nodes are ignored. A zone change recomputes every service; a change
// of the addresses or pod CIDRs, read only when Config.Needs.Node asks for
// them, changes the next snapshot's Node.
func (st *State) SetNode(n *corev1.Node) {
	if n.Name != st.cfg.NodeName {
		return
	}
	if st.cfg.Needs.Node {
		facts, err := ConvertNode(n)
		st.setInvalid(objRef{"Node", "", n.Name}, err)
		st.setNodeFacts(facts)
	}
	st.setNode(NodeFrom(n))
}

// DeleteNode forgets this node's zone (and its facts).
func (st *State) DeleteNode(name string) {
	st.setInvalid(objRef{"Node", "", name}, nil)
	if name != st.cfg.NodeName {
		return
	}
	st.setNodeFacts(nil)
	st.setNode(Node{Name: st.cfg.NodeName})
}

func (st *State) setNode(n Node) {
	if n == st.node {
		return
	}
	st.node = n
	for k, e := range st.services {
		if e.svc != nil {
			st.markDirty(k, e)
		}
	}
}

// setNodeFacts records the facts the next snapshot's Node holds.
func (st *State) setNodeFacts(n *client.Node) {
	if n.Equal(st.facts.node) {
		return
	}
	st.facts.node = n
	st.facts.dirty = true
}
