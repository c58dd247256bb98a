package xtables

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"

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

// TestParseGeneration decodes NFT_MSG_NEWGEN answers.
func TestParseGeneration(t *testing.T) {
	answer := func(attrs ...netfilter.Attribute) []netlink.Message {
		m, err := netfilter.MarshalNetlink(netfilter.Header{SubsystemID: netfilter.NFSubsysNFTables, MessageType: 15}, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return []netlink.Message{m}
	}
	tests := []struct {
		name    string
		msgs    []netlink.Message
		want    uint32
		wantErr bool
	}{
		{name: "id", msgs: answer(netfilter.Attribute{Type: nftaGenID, Data: []byte{0, 1, 0, 2}},
			netfilter.Attribute{Type: 2, Data: []byte{0, 0, 0, 9}}), want: 65538},
		{name: "no id", msgs: answer(netfilter.Attribute{Type: 2, Data: []byte{0, 0, 0, 9}}), wantErr: true},
		{name: "short id", msgs: answer(netfilter.Attribute{Type: nftaGenID, Data: []byte{0, 1}}), wantErr: true},
		{name: "no message", wantErr: true},
		{name: "no nfgenmsg", msgs: []netlink.Message{{Data: []byte{0, 0}}}, wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseGeneration(tc.msgs)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}
