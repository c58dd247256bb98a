package nftables

import (
	"errors"
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// CleanupLeftovers removes the tables ip kube-proxy and ip6 kube-proxy,
// this Proxier's or kube-proxy's nftables mode's, with everything in
// them, in the network namespace netns (0: the caller's); nothing else is
// touched. A table that does not exist is not an error. It returns what
// it removed.
func CleanupLeftovers(netns int) ([]string, error) {
	c, err := nft.Dial(&nft.Config{NetNS: netns})
	if err != nil {
		return nil, fmt.Errorf("nftables: cleanup: %w", err)
	}
	defer c.Close()
	var removed []string
	var errs []error
	for _, fam := range []nft.Family{nft.FamilyIPv4, nft.FamilyIPv6} {
		tables, err := c.Tables(fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("nftables: cleanup: %w", err))
			continue
		}
		for _, t := range tables {
			if t.Name != TableName {
				continue
			}
			tx := nft.NewTx()
			tx.DelTable("", fam, TableName)
			if _, err := c.Commit(tx, nil); err != nil {
				errs = append(errs, fmt.Errorf("nftables: cleanup: %w", err))
				continue
			}
			removed = append(removed, fmt.Sprintf("table %v %s", fam, TableName))
		}
	}
	return removed, errors.Join(errs...)
}
