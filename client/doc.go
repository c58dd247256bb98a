// Package client is proxysinks' node-local service model: what one node must
// serve, computed from the cluster's Services and EndpointSlices, and the two
// ways a sink receives it.
//
// The vocabulary follows KPNG's client (ServiceEndpoints, Callback,
// SetService/SetEndpoint...), with what KPNG lacked: endpoint conditions
// (ready, serving, terminating), node and zone, typed addresses
// (netip.Addr, netip.Prefix) and integer ports, so sinks never parse strings.
//
// Full-state sinks implement a [Callback]: it is called once per consistent
// snapshot with every service in (namespace, name) order. Incremental sinks
// implement [Sink]: SetService, DeleteService, SetEndpoint, DeleteEndpoint and
// Sync. Sources (client/source/kube, client/source/file) deliver [Snapshot]
// values that carry both the full state and the services that changed;
// [ToCallback] and the client/diff package adapt them to either kind of sink.
//
// Every value handed to a sink is shared and must be treated as read-only.
package client
