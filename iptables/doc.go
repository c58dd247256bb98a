// Package iptables will hold the classic iptables proxier
// (OnServiceUpdate/OnEndpointsUpdate/Sync/SyncLoop, CleanupLeftovers,
// CanUseIPTablesProxier).
package iptables
