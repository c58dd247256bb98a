// Package netlinkraw holds proxysinks' hand-written kernel clients: ipvs
// (generic netlink), ipset (nfnetlink) and link (rtnetlink through
// jsimonetti/rtnetlink), each with a fake that passes the same contract suite
// as the real kernel. The clients live in the subpackages; ipvs and ipset sit
// on one internal netlink core (internal/nlcore). This package holds what
// all three share: the reply-timeout policy (DefaultReplyTimeout,
// ReplyTimeout) and the errors every client returns alike
// (ErrReplyTimeout, ErrDumpInterrupted).
package netlinkraw
