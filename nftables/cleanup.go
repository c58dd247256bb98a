package nftables

import (
	"errors"
	"fmt"
	"log/slog"

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

// CleanupForOtherMode is what kube-proxy's iptables and IPVS modes do at
// start (platformCleanup): remove the nftables mode's tables, whose
// chains would otherwise go on answering for the services, in the
// caller's network namespace. Failures are logged, not returned: a
// kernel without nf_tables has nothing to remove.
func CleanupForOtherMode(log *slog.Logger) {
	removed, err := CleanupLeftovers(0)
	for _, r := range removed {
		log.Info("removed the nftables mode's leftovers", "object", r)
	}
	if err != nil {
		log.Info("nothing of the nftables mode removed", "error", err)
	}
}
