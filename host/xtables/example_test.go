package xtables_test

import (
	"log"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// Restore a table with the iptables variant the node already uses, keeping
// every chain the input does not name. (Not run by go test: it changes the
// caller's network namespace; the kernel tests use a fresh one.)
func Example() {
	b, err := xtables.Detect(xtables.IPv4, xtables.Exec)
	if err != nil {
		log.Fatal(err)
	}
	input := []byte("*filter\n:EXAMPLE - [0:0]\n-A EXAMPLE -j RETURN\nCOMMIT\n")
	if _, err := xtables.Exec(b.Command(xtables.IPv4, "restore"), b.RestoreArgs(), input); err != nil {
		log.Fatal(err)
	}
	gen, err := xtables.NFTGeneration(0) // 0: the calling thread's namespace
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("rules restored with iptables-%s; nf_tables generation %d", b, gen)
}
