// Package nlcore is the netlink machinery every hand-written client of
// netlinkraw sits on: one message and attribute encoder (Encoder), one
// parser (ParseMessages, ForEachAttr and the Get helpers), socket setup and
// buffer sizing (Dial, SetBuffers), the request/answer exchange with late
// replies skipped by sequence number (Conn.Collect, Conn.Request,
// Conn.Exchange), dumps with the interrupted-dump retry and the draining of
// abandoned dumps (Conn.Dump), and nfnetlink batch transactions
// (Conn.Transact). The families' packages (ipvs, ipset) keep only their own
// commands and attributes.
package nlcore
