// Package ipvs programs the kernel's IP Virtual Server over generic netlink
// (the "IPVS" family of linux/ip_vs.h), in a network namespace of the
// caller's choice, with many operations per system call.
//
// Services and destinations are comparable values built on net/netip; their
// keys (Service.Key, Destination.Key) are map keys. Dumps return them with
// their 64-bit counters and connection counts in ServiceEntry and
// DestinationEntry.
//
// Conn.Apply sends any number of create, update and remove operations in
// as few sendmsg calls as the socket buffers allow, asking for an ACK only
// on the last message of each: the kernel answers every failed message
// with an error carrying its sequence number, so one ACK per sendmsg
// proves the rest succeeded. Failures are reported per operation
// (*BatchError, *Error) and do not stop the others. Errors name the
// operation and the object and wrap the kernel's errno:
//
//	ipvs: create destination 10.244.1.5:8080 on TCP/10.96.0.10:53: file exists
//
// A kernel without IPVS makes Dial fail with ErrNotSupported.
//
// Package ipvstest is a fake kernel that passes the same contract suite as
// the real one, for tests on machines without IPVS.
package ipvs
