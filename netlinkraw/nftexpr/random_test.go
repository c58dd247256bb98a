package nftexpr

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// randomPrefix returns an address or prefix of the family, drawn from a
// small space so that sets often overlap, touch and reach the ends.
func randomPrefix(r *rand.Rand, v6 bool) string {
	var a netip.Addr
	if v6 {
		var b [16]byte
		b[0] = byte(r.IntN(3)) * 0x7f
		b[1], b[15] = byte(r.IntN(4)), byte(r.IntN(4))
		a = netip.AddrFrom16(b)
	} else {
		a = netip.AddrFrom4([4]byte{byte(r.IntN(3)) * 0x7f, byte(r.IntN(4)), 0, byte(r.IntN(4))})
	}
	if r.IntN(3) == 0 {
		return a.String()
	}
	bits := r.IntN(a.BitLen() + 1)
	return netip.PrefixFrom(a, bits).Masked().String()
}

// TestRandomSetsAgainstNFT compares anonymous sets of random addresses
// and prefixes (overlapping, adjacent, covering the ends of the address
// space) with nft's, which sorts and merges them into intervals.
func TestRandomSetsAgainstNFT(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 2))
	for _, tc := range []struct {
		name   string
		family nft.Family
	}{{"ip", nft.FamilyIPv4}, {"ip6", nft.FamilyIPv6}} {
		t.Run(tc.name, func(t *testing.T) {
			v6 := tc.family == nft.FamilyIPv6
			ip := "ip"
			if v6 {
				ip = "ip6"
			}
			st := &scriptTable{family: tc.family, name: "t", chains: []chainDef{{name: "c"}}}
			for range 60 {
				var elems []string
				for range 1 + r.IntN(6) {
					elems = append(elems, randomPrefix(r, v6))
				}
				op := ""
				if r.IntN(2) == 0 {
					op = "!= "
				}
				dir := []string{"saddr", "daddr"}[r.IntN(2)]
				st.rules = append(st.rules, ruleDef{chain: "c", text: fmt.Sprintf("%s %s %s{ %s } drop", ip, dir, op, strings.Join(elems, " , "))})
			}
			checkOracle(t, st)
		})
	}
}

// FuzzRule: no text makes the compiler panic, and a text that compiles
// prints.
func FuzzRule(f *testing.F) {
	for _, r := range append(append([]ruleDef(nil), ipForms...), ip6Forms...) {
		f.Add(r.text)
	}
	tab, err := NewTable(nft.FamilyIPv4)
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range kubeSets(nft.FamilyIPv4) {
		if _, err := tab.AddSet(d, 0); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := tab.Rule("c", text, "", func() uint32 { return 1 })
		if err != nil {
			return
		}
		var b strings.Builder
		if err := FormatRule(&b, nft.FamilyIPv4, "t", r.Rule); err != nil {
			t.Errorf("rule %q compiled but does not print: %v", text, err)
		}
	})
}

// FuzzFormatRule: the debug printer reads any bytes without panicking.
func FuzzFormatRule(f *testing.F) {
	tab, err := NewTable(nft.FamilyIPv4)
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range kubeSets(nft.FamilyIPv4) {
		if _, err := tab.AddSet(d, 0); err != nil {
			f.Fatal(err)
		}
	}
	for _, r := range ipForms {
		cr, err := tab.Rule("c", r.text, "", func() uint32 { return 1 })
		if err != nil {
			f.Fatal(err)
		}
		f.Add(cr.Exprs)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var sb strings.Builder
		_ = FormatRule(&sb, nft.FamilyIPv4, "t", nft.Rule{Chain: "c", Exprs: b})
	})
}
