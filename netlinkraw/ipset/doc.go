// Package ipset is an ipset client speaking nfnetlink (subsystem 6)
// directly, for the proxysinks IPVS sinks: no `ipset` process per entry, and
// thousands of entries per system call.
//
// It supports the set types the sinks use — hash:ip, hash:ip,port (TCP, UDP,
// SCTP), hash:ip,port,ip, hash:ip,port,net, hash:net and bitmap:port — in
// both families, with hashsize, maxelem, bitmap ranges, and the timeout,
// counters and comment extensions, and nomatch entries.
//
// Dial negotiates the protocol (7, or 6 on older kernels). Create, Destroy,
// Flush, Rename, Swap, Header, List, ListNames, Add, Del and Test map to
// ipset's commands; the Exist option gives each call the CLI's -exist
// semantics (create if absent, add if absent, delete if present).
//
// Add and Del batch: many entries go into one message (IPSET_ATTR_ADT, each
// entry tagged with its line number) and many messages into one sendmsg;
// only the last message of a sendmsg asks for an acknowledgement. The
// kernel stops a message at its first failing entry and names the line;
// that entry is reported in a *BatchError and the entries after it are sent
// again, so every failure is mapped to exactly its entry and every other
// entry is applied. ipset's private error codes become Errno values with
// readable texts ("element already exists", "set is full", "set type not
// supported").
//
// Stats counts system calls, messages and bytes. The package ipsettest
// holds an in-memory Fake and the contract suite that both the Fake and the
// kernel pass.
package ipset
