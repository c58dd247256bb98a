package kpconfig

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Gate is how the sinks treat one of kube-proxy's feature gates: those
// that change what kube-proxy v1.37.2 programs (read from its pkg/proxy and
// cmd/kube-proxy) and those locked to a value (kube-proxy refuses another).
// A gate not in Gates changes nothing kube-proxy programs: it is accepted
// and logged once.
type Gate struct {
	Name string
	// On is the value the sinks behave as: they honour the gate set to
	// On and refuse the other value (Why says why), unless Modes leaves
	// the sink's mode out.
	On bool
	// Modes, when set, are the proxy modes whose programming the gate
	// changes; in another mode either value is accepted and logged.
	Modes []string
	// Locked: kube-proxy v1.37.2 itself refuses the other value.
	Locked bool
	// Either: in its modes the other value is accepted too, and logged
	// with Why (the gate changes how kube-proxy writes, not what).
	Either bool
	// Why is the reason another value is refused.
	Why string
	// Does says what the gate changes (the docs and the warnings).
	Does string
}

// Gates are kube-proxy v1.37.2's feature gates that change what it
// programs on Linux, or that it locks.
var Gates = []Gate{
	{Name: "AllowServiceExternalIPs", On: true, Does: "programs Services' externalIPs",
		Why: "the sinks always program Services' externalIPs"},
	{Name: "KubeProxyIPVS", On: true, Modes: []string{"ipvs"}, Does: "allows the ipvs proxy mode",
		Why: "it turns kube-proxy's ipvs mode off, and this sink is that mode"},
	{Name: "MultiCIDRServiceAllocator", On: true, Locked: true, Does: "watches ServiceCIDRs (no change to iptables or ipvs rules)",
		Why: "kube-proxy v1.37.2 locks it to true"},
	{Name: "PreferSameTrafficDistribution", On: true, Locked: true, Does: "follows EndpointSlices' node hints (trafficDistribution PreferSameNode)",
		Why: "kube-proxy v1.37.2 locks it to true, and the sinks follow node hints"},
	{Name: "KubeProxyNFTablesLocalhostNodePorts", On: false, Modes: []string{"nftables"}, Does: "serves NodePorts on localhost in nftables mode (alpha)",
		Why: "the nftables sink does not serve NodePorts on localhost (kube-proxy v1.37.2's alpha gate; its default, false, is what the sink does)"},
	{Name: "NFTablesNetlink", On: true, Modes: []string{"nftables"}, Either: true, Does: "talks netlink to nf_tables in nftables mode (false: runs the nft binary)",
		Why: "the nftables sink always writes over netlink, the same rules kube-proxy's nft binary would"},
	{Name: "WinDSR", On: true, Locked: true, Modes: []string{"kernelspace"}, Does: "direct server return on Windows",
		Why: "kube-proxy v1.37.2 locks it to true"},
	{Name: "WinOverlay", On: true, Locked: true, Modes: []string{"kernelspace"}, Does: "overlay networks on Windows",
		Why: "kube-proxy v1.37.2 locks it to true"},
}

// ParseGates parses feature gates in kube-proxy's --feature-gates syntax:
// Name=bool pairs, comma-separated (vals may hold several).
func ParseGates(vals []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, v := range vals {
		for _, kv := range strings.Split(v, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			name, val, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%q is not Name=true or Name=false", kv)
			}
			b, err := strconv.ParseBool(strings.TrimSpace(val))
			if err != nil {
				return nil, fmt.Errorf("%q: %q is not true or false", kv, val)
			}
			out[strings.TrimSpace(name)] = b
		}
	}
	return out, nil
}

// FormatGates writes gates in --feature-gates syntax, sorted by name.
func FormatGates(gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		names[i] = n + "=" + strconv.FormatBool(gates[n])
	}
	return strings.Join(names, ",")
}

// CheckGates classes the gates set for a sink of mode: a gate the sink
// behaves as is honoured (silently), one it cannot honour is an error
// naming it, every other is a warning (logged once). Messages name the
// gates, sorted.
func CheckGates(mode string, gates map[string]bool) (warnings []string, err error) {
	var errs []error
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		val := gates[name]
		i := slices.IndexFunc(Gates, func(g Gate) bool { return g.Name == name })
		if i < 0 {
			warnings = append(warnings, fmt.Sprintf("%s=%t ignored: the gate changes nothing kube-proxy v1.37.2 programs", name, val))
			continue
		}
		g := Gates[i]
		applies := len(g.Modes) == 0 || slices.Contains(g.Modes, mode)
		switch {
		case val == g.On && applies:
		case val != g.On && applies && g.Either:
			warnings = append(warnings, fmt.Sprintf("%s=%t ignored: %s", name, val, g.Why))
		case val != g.On && (applies || g.Locked):
			errs = append(errs, fmt.Errorf("%s=%t: %s", name, val, g.Why))
		default:
			warnings = append(warnings, fmt.Sprintf("%s=%t ignored: only %s mode (%s)", name, val, strings.Join(g.Modes, ", "), g.Does))
		}
	}
	return warnings, errors.Join(errs...)
}

// CheckMode checks a proxy mode (the file's mode, or --proxy-mode) against
// the sink's: "" is kube-proxy's default on Linux, iptables.
func CheckMode(mode, sink string) error {
	eff := mode
	if eff == "" {
		eff = DefaultMode
	}
	if eff == sink {
		return nil
	}
	if mode == "" {
		return fmt.Errorf("is empty, which is kube-proxy's default mode %s, but this is the %s sink: set %s", DefaultMode, sink, sink)
	}
	return fmt.Errorf("is %q, but this is the %s sink (the binary chooses the mode)", mode, sink)
}

// DefaultMode is kube-proxy's proxy mode on Linux when none is given.
const DefaultMode = "iptables"
