package xtables

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"
)

// nf_tables' generation message and attribute (linux/netfilter/nf_tables.h).
const (
	nftMsgGetGen = 16 // NFT_MSG_GETGEN
	nftaGenID    = 1  // NFTA_GEN_ID
)

// NFTGeneration returns the nf_tables ruleset generation of a network
// namespace (netns is a file descriptor of it; 0 means the calling
// thread's). The kernel keeps one generation per namespace, for every
// family and table, and every committed nf_tables transaction increments
// it, whoever commits (iptables-nft, nft, firewalld): an unchanged
// generation means the iptables-nft rules are as they were. Reading
// ruleset (iptables-nft-save) does not change it; the legacy backend has
// none.
func NFTGeneration(netns int) (uint32, error) {
	c, err := netfilter.Dial(&netlink.Config{NetNS: netns})
	if err != nil {
		return 0, fmt.Errorf("xtables: read nf_tables generation: dial nfnetlink: %w", err)
	}
	defer c.Close()
	req, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysNFTables,
		MessageType: nftMsgGetGen,
		Family:      netfilter.ProtoUnspec,
		Flags:       netlink.Request,
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("xtables: read nf_tables generation: encode request: %w", err)
	}
	msgs, err := c.Query(req)
	if err != nil {
		return 0, fmt.Errorf("xtables: read nf_tables generation: %w", err)
	}
	return parseGeneration(msgs)
}

// parseGeneration returns NFTA_GEN_ID of the kernel's answer to
// NFT_MSG_GETGEN.
func parseGeneration(msgs []netlink.Message) (uint32, error) {
	for _, m := range msgs {
		_, attrs, err := netfilter.UnmarshalNetlink(m)
		if err != nil {
			return 0, fmt.Errorf("xtables: read nf_tables generation: decode answer: %w", err)
		}
		for _, a := range attrs {
			if a.Type == nftaGenID && len(a.Data) == 4 {
				return binary.BigEndian.Uint32(a.Data), nil
			}
		}
	}
	return 0, fmt.Errorf("xtables: read nf_tables generation: no NFTA_GEN_ID in %d answer messages", len(msgs))
}
