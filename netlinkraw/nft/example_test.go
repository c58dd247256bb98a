package nft_test

import (
	"errors"
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// Example writes a table with a chain, a verdict map and an element in one
// transaction checked against the generation read before, then lists the
// chains. (Compiled, not run: it needs root and changes the caller's
// namespace; the kernel tests run the same in a fresh one.)
func Example() {
	c, err := nft.Dial(&nft.Config{}) // NetNS: a namespace's fd; 0: the caller's
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	gen, err := c.Generation()
	if err != nil {
		fmt.Println(err)
		return
	}
	const fam, table = nft.FamilyIPv4, "example"
	tx := nft.NewTx()
	tx.AddTable("", nft.Table{Family: fam, Name: table})
	tx.AddChain("service chain", fam, table, nft.Chain{Name: "svc"})
	vm := nft.Set{Name: "services", Flags: nft.SetMap, KeyType: 7, KeyLen: 4, DataType: nft.DataVerdict} // ipv4_addr : verdict
	tx.AddSet("services map", fam, table, vm)
	tx.AddElems("10.96.0.10", fam, table, vm, []nft.Elem{
		{Key: []byte{10, 96, 0, 10}, Verdict: &nft.Verdict{Code: nft.VerdictJump, Chain: "svc"}},
	})
	gen, err = c.Commit(tx, &gen)
	var ce *nft.CommitError
	switch {
	case errors.Is(err, nft.ErrGenerationChanged):
		fmt.Println("someone else committed: read the ruleset again")
	case errors.As(err, &ce):
		for _, f := range ce.Failed {
			fmt.Println("refused:", f.Label, f.Err)
		}
	case err != nil:
		fmt.Println(err)
	}
	chains, err := c.Chains(fam, table)
	fmt.Println(gen, len(chains), err)
}
