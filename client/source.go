package client

import "context"

// Source is what the kube and file sources (client/source/...) have in
// common, so that a sink binary can pick one by flag.
type Source interface {
	// Run delivers snapshots until ctx is done: the first once the source
	// has a consistent view, then one per coalesced burst of changes.
	Run(ctx context.Context, deliver func(*Snapshot)) error
	// Stats returns the counters a sink exports as metrics.
	Stats() Stats
	// Errors returns the objects that are invalid right now.
	Errors() []*ObjectError
}

// Stats counts what a source could not or would not serve.
type Stats struct {
	// InvalidTotal counts every invalid object version seen (a counter,
	// never decreasing).
	InvalidTotal uint64
	// Invalid is the number of objects that are invalid right now.
	Invalid int
	// NotProxied is the number of valid services skipped on purpose:
	// headless, ExternalName, or labelled for another proxy.
	NotProxied int
	// RepairedValuesTotal counts values of served objects read
	// differently from their text, as kube-proxy reads them (legacy
	// leading zeros, IPv4-mapped IPv6, host bits); SkippedValuesTotal
	// counts values left out while the rest of their object is served
	// (a bad external IP, source range or endpoint address, an address of
	// a family the service lacks, an unknown ipMode). Each distinct value
	// of an object is counted once.
	RepairedValuesTotal uint64
	SkippedValuesTotal  uint64
	// Services is the number of services served.
	Services int
	// Stale is set while the source cannot give a state it trusts: before
	// its first snapshot, or while some of its input cannot be read (a
	// manifest that does not parse or reads as empty). The last good state
	// is what is served meanwhile; StaleReason says why, naming the input.
	Stale       bool
	StaleReason string
}
