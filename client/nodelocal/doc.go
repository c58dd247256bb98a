// Package nodelocal computes what one node must serve from Kubernetes
// Services, EndpointSlices and the node's own Node object. It is the pure
// code shared by the kube and file sources: converting and validating API
// objects ([ConvertService], [ParseSlice]), the node-local rules
// ([Compute]: which endpoints are local, topology hints, traffic policies,
// ready/serving/terminating) and the bookkeeping that turns object events
// into snapshots listing only the services that changed ([State]).
package nodelocal
