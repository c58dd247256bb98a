package dataplane

import (
	"slices"

	"github.com/proxysinks/proxysinks/host/kernel"
)

// The IPVS modules IPVS mode needs (the conntrack ones are
// kernel.ModuleNFConntrack and kernel.ModuleNFConntrackIPv4).
const (
	ModuleIPVS    = "ip_vs"
	ModuleIPVSRR  = "ip_vs_rr"
	ModuleIPVSWRR = "ip_vs_wrr"
	ModuleIPVSSH  = "ip_vs_sh"
)

// RequiredIPVSModules returns the modules IPVS mode needs on a kernel of the
// given version, as kube-proxy checks them: IPVS with the rr, wrr and sh
// schedulers, and conntrack (nf_conntrack_ipv4 before 4.19, nf_conntrack
// since), plus the module of the configured scheduler when it is another.
func RequiredIPVSModules(v kernel.Version, scheduler string) []string {
	mods := []string{ModuleIPVS, ModuleIPVSRR, ModuleIPVSWRR, ModuleIPVSSH}
	if v.AtLeast(4, 19) {
		mods = append(mods, kernel.ModuleNFConntrack)
	} else {
		mods = append(mods, kernel.ModuleNFConntrackIPv4)
	}
	if scheduler != "" {
		if m := "ip_vs_" + scheduler; !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	return mods
}

// IPVSSysctls returns the sysctls kube-proxy's IPVS mode sets on a kernel of
// the given version. The vs/* ones exist only once ip_vs is loaded.
func IPVSSysctls(v kernel.Version, strictARP bool) []kernel.Setting {
	s := []kernel.Setting{
		{Name: "net/ipv4/vs/conntrack", Value: 1},
		{Name: "net/ipv4/vs/expire_nodest_conn", Value: 1},
		{Name: "net/ipv4/vs/expire_quiescent_template", Value: 1},
		{Name: "net/ipv4/ip_forward", Value: 1},
	}
	// Between 4.1 and 5.9, conn_reuse_mode=1 delays reused connections by a
	// second; later kernels fixed it.
	if v.AtLeast(4, 1) && !v.AtLeast(5, 9) {
		s = append(s, kernel.Setting{Name: "net/ipv4/vs/conn_reuse_mode", Value: 0})
	}
	if strictARP {
		s = append(s, kernel.Setting{Name: "net/ipv4/conf/all/arp_ignore", Value: 1}, kernel.Setting{Name: "net/ipv4/conf/all/arp_announce", Value: 2})
	}
	return s
}
