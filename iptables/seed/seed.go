// Package seed is seed 002's surface of the iptables Proxier (NewProxier,
// OnServiceUpdate, OnEndpointsUpdate, Sync, SyncLoop, CleanupLeftovers,
// CanUseIPTablesProxier, KubeMarkMasqChain, KubeMarkDropChain), kept for
// callers written against the seed. Each entry point is a thin wrapper over
// package iptables, which the sink binary uses directly: there the runtime
// delivers snapshots and runs the periodic resync, so the seed's full-state
// updates and second resync loop stay out of the production path.
package seed

import (
	"context"
	"slices"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
)

// The seed's chain names.
const (
	// KubeMarkMasqChain is the mark-for-masquerade chain (nat).
	KubeMarkMasqChain = iptables.KubeMarkMasqChain
	// KubeMarkDropChain is the mark-for-drop chain of the 2016 proxier. Like
	// kube-proxy since 1.28, the Proxier neither creates nor uses it; the
	// name is kept for callers of the seed's surface.
	KubeMarkDropChain = "KUBE-MARK-DROP"
)

// DefaultSyncPeriod is SyncLoop's period when iptables.Config.SyncPeriod
// is not positive (kube-proxy's default --iptables-sync-period).
const DefaultSyncPeriod = 30 * time.Second

// IPTablesVersioner can query the current iptables version.
type IPTablesVersioner = iptables.IPTablesVersioner

// KernelCompatTester tests whether the required kernel capabilities are
// present to run the iptables proxier.
type KernelCompatTester = iptables.KernelCompatTester

// LinuxKernelCompatTester is the KernelCompatTester of Linux.
type LinuxKernelCompatTester = iptables.LinuxKernelCompatTester

// CanUseIPTablesProxier reports whether this node can run the Proxier
// (iptables.CanUseIPTablesProxier).
func CanUseIPTablesProxier(iptver IPTablesVersioner, kcompat KernelCompatTester) (bool, error) {
	return iptables.CanUseIPTablesProxier(iptver, kcompat)
}

// CleanupLeftovers removes every rule and chain the Proxier creates
// (iptables.CleanupLeftovers); run nil means xtables.Exec.
func CleanupLeftovers(run xtables.Runner) error {
	return iptables.CleanupLeftovers(run)
}

// Proxier is the seed's Proxier: an iptables.Proxier (every method of
// which it has) with the seed's full-state entry points and its own
// resync loop.
type Proxier struct {
	*iptables.Proxier
	period time.Duration
}

// NewProxier returns the seed's Proxier over iptables.NewProxier(cfg);
// cfg.SyncPeriod is SyncLoop's period.
func NewProxier(cfg iptables.Config) (*Proxier, error) {
	p, err := iptables.NewProxier(cfg)
	if err != nil {
		return nil, err
	}
	period := cfg.SyncPeriod
	if period <= 0 {
		period = DefaultSyncPeriod
	}
	return &Proxier{Proxier: p, period: period}, nil
}

// OnServiceUpdate programs the complete set of services with their
// endpoints, in any order: a full sync of that state. In this project's
// model endpoints travel with their service, so it is the same as
// OnEndpointsUpdate.
func (p *Proxier) OnServiceUpdate(all []*client.ServiceEndpoints) error {
	return p.fullState(all)
}

// OnEndpointsUpdate programs the complete set of services with their
// endpoints (see OnServiceUpdate).
func (p *Proxier) OnEndpointsUpdate(all []*client.ServiceEndpoints) error {
	return p.fullState(all)
}

// fullState programs all as a full snapshot, in the key order snapshots
// keep.
func (p *Proxier) fullState(all []*client.ServiceEndpoints) error {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	s := client.NewSnapshot(sorted, nil)
	s.Full = true
	_, err := p.Snapshot(s)
	return err
}

// Sync immediately runs a full sync of the last state (iptables'
// Proxier.Resync); with no state yet it does nothing.
func (p *Proxier) Sync() error {
	_, err := p.Resync()
	return err
}

// SyncLoop runs Sync every period until ctx ends, reporting each sync's
// error to onError (which may be nil).
func (p *Proxier) SyncLoop(ctx context.Context, onError func(error)) {
	tick := time.NewTicker(p.period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := p.Sync(); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}
