// Package ipvssinktest holds what the IPVS sink binaries' tests share.
package ipvssinktest

import (
	"testing"

	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/sinks/ipvssink"
)

// DualStackHost makes the IPVS sinks find a host with IPv6 enabled
// (ipvssink.HostSysctl decides the families) until t ends, whatever this
// machine has, so that their output does not depend on it.
func DualStackHost(t testing.TB) {
	ipvssink.HostSysctl = dataplanetest.HostSysctl(t, true)
	t.Cleanup(func() { ipvssink.HostSysctl = kernel.Sysctl{} })
}
