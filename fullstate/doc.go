// Package fullstate will hold the diffstore and the IPVS full-state
// controller that renders every object on each snapshot and applies only the
// differences (issue 5).
package fullstate
