package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// ownedChains are the top-level chains CleanupLeftovers deletes, per
// table; every nat per-service chain (KUBE-SVC- and the others) goes too.
// kubelet's KUBE-FIREWALL stays, as with kube-proxy.
var ownedChains = map[string][]string{
	"filter": {chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall, chainCanary},
	"nat":    {chainServices, chainNodePorts, chainPostrouting, KubeMarkMasqChain, chainCanary},
	"mangle": {chainCanary},
}

var builtinChains = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// CleanupLeftovers removes every rule and chain the Proxier creates, in both
// families and with every iptables backend whose tools are installed: the
// jumps from the built-in chains to ours, our top-level chains and every
// per-service chain. Other rules and chains are left alone. run nil means
// xtables.Exec. The error names each table that could not be cleaned.
func CleanupLeftovers(run xtables.Runner) error {
	if run == nil {
		run = xtables.Exec
	}
	var errs []error
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
			if err := cleanup(run, f, b); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func cleanup(run xtables.Runner, f xtables.Family, b xtables.Backend) error {
	var input bytes.Buffer
	var errs []error
	for _, table := range tables {
		out, err := run(b.Command(f, "save"), []string{"-t", table}, nil)
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return nil // this backend is not installed
			}
			errs = append(errs, fmt.Errorf("iptables: read %s %s table %s: %w", b, f, table, err))
			continue
		}
		kt := parseSave(out)
		var doomed []string
		for _, c := range ownedChains[table] {
			if kt.chains[c] {
				doomed = append(doomed, c)
			}
		}
		if table == "nat" {
			var svc []string
			for c := range kt.chains {
				if isServiceChain(c) {
					svc = append(svc, c)
				}
			}
			slices.Sort(svc)
			doomed = append(doomed, svc...)
		}
		if len(doomed) == 0 {
			continue
		}
		fmt.Fprintf(&input, "*%s\n", table)
		// Rules of built-in chains that jump to a chain about to go.
		for _, bc := range builtinChains {
			for _, l := range kt.rules[bc] {
				target := l[strings.LastIndex(l, " -j ")+4:]
				target, _, _ = strings.Cut(target, " ")
				if strings.Contains(l, " -j ") && slices.Contains(doomed, target) {
					fmt.Fprintf(&input, "-D %s\n", strings.TrimPrefix(l, "-A "))
				}
			}
		}
		for _, c := range doomed {
			fmt.Fprintf(&input, ":%s - [0:0]\n", c)
		}
		for _, c := range doomed {
			fmt.Fprintf(&input, "-X %s\n", c)
		}
		input.WriteString("COMMIT\n")
	}
	if input.Len() == 0 {
		return errors.Join(errs...)
	}
	if _, err := run(b.Command(f, "restore"), b.RestoreArgs(), input.Bytes()); err != nil {
		errs = append(errs, fmt.Errorf("iptables: clean up %s %s rules: %w", b, f, err))
	}
	return errors.Join(errs...)
}
