// Package nftexpr compiles nft's rule language, the subset kube-proxy's
// nftables mode writes, into the netlink objects nft v1.0.6 itself sends:
// rule expression lists, set and map definitions with nft's USERDATA,
// set elements, base and regular chains.
//
// A Table holds the compile context of one nf_tables table: its family and
// the sets and maps defined in it (rules that look them up need their key
// types). Rules compile to nft.Rule plus the anonymous sets and maps the
// rule creates (`ip daddr { 10.96.0.0/16, 10.97.0.0/16 }`, `numgen random
// mod 3 map { ... }`), which must be added in the same transaction, before
// the rule; their IDs come from the caller (the transaction's set IDs).
//
// Every form is proved against nft itself: the tests run `nft -c
// --debug=netlink,mnl` on the same text and compare the messages byte for
// byte and the expressions in libnftnl's debug format, which Format
// prints (also a debugging aid).
package nftexpr
