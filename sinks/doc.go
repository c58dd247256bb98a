// Package sinks will hold one main package per sink binary (ipvs-fullstate,
// ipvs-incremental, iptables) with their command lines and HTTP endpoints.
package sinks
