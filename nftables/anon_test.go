package nftables

import (
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// TestNameHash: the digest is read back from the names nameAnon gives, and
// from no other name.
func TestNameHash(t *testing.T) {
	r := compiledRule{anon: []anonSet{{set: nft.Set{Name: "__map%d", ID: 7, Flags: nft.SetAnonymous}, elems: []nft.Elem{{Key: []byte{1}}}}}}
	r.rule.Exprs = encExpr("lookup", appendAttr(appendAttr(nil, nftaLookupSet, []byte("__map%d\x00")), nftaLookupID, []byte{0, 0, 0, 7}))
	if err := nameAnon(&r); err != nil {
		t.Fatal(err)
	}
	name := r.anon[0].set.Name
	if h, ok := nameHash(name); !ok || h != anonHash(&r.anon[0].set, r.anon[0].elems) {
		t.Errorf("nameHash(%q) = %q, %v", name, h, ok)
	}
	got := ""
	if _, err := canonRule(r.rule.Exprs, func(n string, _ uint32, _ bool) string { got = n; return n }); err != nil || got != name {
		t.Errorf("the rule's lookup refers to %q (%v), want %q", got, err, name)
	}
	for _, n := range []string{"__map3", "__map%d", "__mapp0123.4", "__setpzzzzzzzzzzzzzzzz.1", "service-ips"} {
		if h, ok := nameHash(n); ok {
			t.Errorf("nameHash(%q) = %q, want none", n, h)
		}
	}
}
