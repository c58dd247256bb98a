package xtables

import (
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// NFTGeneration returns the nf_tables ruleset generation of a network
// namespace (netns is a file descriptor of it; 0 means the calling
// thread's). The kernel keeps one generation per namespace, for every
// family and table, and every committed nf_tables transaction increments
// it, whoever commits (iptables-nft, nft, firewalld): an unchanged
// generation means the iptables-nft rules are as they were. Reading
// ruleset (iptables-nft-save) does not change it; the legacy backend has
// none. The reader is nft.ReadGeneration.
func NFTGeneration(netns int) (uint32, error) {
	g, err := nft.ReadGeneration(netns)
	if err != nil {
		return 0, fmt.Errorf("xtables: %w", err)
	}
	return g, nil
}
