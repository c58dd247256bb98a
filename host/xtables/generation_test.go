package xtables

import (
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestNFTGeneration: the nf_tables generation of a namespace moves by one
// per committed transaction, whoever commits, and only then:
// iptables-nft-restore commits each table section that changes something
// on its own (the iptables Proxier counts its commits so), reads and
// failed restores commit nothing, and another namespace's commits do not
// count.
func TestNFTGeneration(t *testing.T) {
	nstest.LookPath(t, "iptables-nft-restore")
	nstest.LookPath(t, "ip6tables-nft-restore")
	ns, other := nstest.New(t), nstest.New(t)
	run, runOther := ExecWith(ns.Do), ExecWith(other.Do)
	restore := func(r Runner, tool, input string) func() error {
		return func() error { _, err := r(tool, []string{"--noflush"}, []byte(input)); return err }
	}
	steps := []struct {
		name    string
		do      func() error
		wantErr bool
		delta   uint32
	}{
		{name: "save", do: func() error { _, err := run("iptables-nft-save", []string{"-t", "nat"}, nil); return err }},
		{name: "restore of two tables", do: restore(run, "iptables-nft-restore", "*nat\n:A - [0:0]\n-A A -j RETURN\nCOMMIT\n*filter\n:B - [0:0]\nCOMMIT\n"), delta: 2},
		{name: "restore of three tables", do: restore(run, "iptables-nft-restore", "*nat\n:A - [0:0]\nCOMMIT\n*filter\n:B - [0:0]\n-A B -j RETURN\nCOMMIT\n*mangle\n:C - [0:0]\nCOMMIT\n"), delta: 3},
		// An empty chain declared again (flushed) is no change: no commit.
		{name: "a section that changes nothing", do: restore(run, "iptables-nft-restore", "*nat\n:A - [0:0]\nCOMMIT\n"), delta: 0},
		{name: "IPv6 restore", do: restore(run, "ip6tables-nft-restore", "*nat\n:A - [0:0]\nCOMMIT\n"), delta: 1},
		{name: "iptables -A", do: func() error {
			_, err := run("iptables-nft", []string{"-t", "nat", "-A", "A", "-j", "RETURN"}, nil)
			return err
		}, delta: 1},
		{name: "failed restore", do: restore(run, "iptables-nft-restore", "*nat\n-D A -j DNAT --to-destination 192.0.2.1\nCOMMIT\n"), wantErr: true},
		{name: "another namespace's restore", do: restore(runOther, "iptables-nft-restore", "*nat\n:A - [0:0]\nCOMMIT\n")},
	}
	gen, err := NFTGeneration(ns.FD())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if err := s.do(); (err != nil) != s.wantErr {
			t.Fatalf("%s: error %v, want error %v", s.name, err, s.wantErr)
		}
		now, err := NFTGeneration(ns.FD())
		if err != nil {
			t.Fatal(err)
		}
		if now-gen != s.delta {
			t.Errorf("%s: generation %d -> %d, want +%d", s.name, gen, now, s.delta)
		}
		gen = now
	}
}
