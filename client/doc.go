// Package client will hold the node-local service model (ServiceEndpoints),
// the full-state and incremental delivery interfaces, and the kube and file
// sources that compute it (issue 4).
package client
