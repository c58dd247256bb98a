// Package netlinkraw holds proxysinks' hand-written kernel clients: ipvs
// (generic netlink), ipset (nfnetlink) and link (rtnetlink through
// jsimonetti/rtnetlink), each with a fake that passes the same contract suite
// as the real kernel. The clients live in the subpackages.
package netlinkraw
