// Package diff adapts between the two delivery styles of package client:
// [Events] turns successive snapshots into the minimal stream of incremental
// events for a [client.Sink], and [Snapshots] is a client.Sink that rebuilds
// snapshots from events, so either kind of sink can run from either source.
package diff
