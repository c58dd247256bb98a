package xtables

import (
	"errors"
	"fmt"
	"strings"
)

// Backend names the iptables variant the node uses: "nft" or "legacy".
type Backend string

// The iptables variants.
const (
	NFT    Backend = "nft"
	Legacy Backend = "legacy"
)

// Command returns the binary of a tool ("save" or "restore") of the
// variant for the family: iptables-nft-save, ip6tables-legacy-restore.
func (b Backend) Command(f Family, tool string) string {
	base := "iptables"
	if f == IPv6 {
		base = "ip6tables"
	}
	return base + "-" + string(b) + "-" + tool
}

// RestoreArgs returns the iptables-restore flags that keep every chain not
// named in the input (and, with legacy, wait for the xtables lock; nft
// needs none).
func (b Backend) RestoreArgs() []string {
	if b == Legacy {
		return []string{"-w", "5", "--noflush"}
	}
	return []string{"--noflush"}
}

// hintChains are the chains kubelet creates in the mangle table of the
// variant it uses; when present they decide the variant.
var hintChains = []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"}

// Detect returns the iptables variant the node already uses for the family:
// the one holding kubelet's hint chains, else the one holding more rules,
// else nft (the default of current distributions). A variant whose tools are
// missing is not considered.
func Detect(f Family, run Runner) (Backend, error) {
	type seen struct {
		b     Backend
		hint  bool
		rules int
	}
	var found []seen
	var errs []error
	for _, b := range []Backend{NFT, Legacy} {
		out, err := run(b.Command(f, "save"), nil, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := seen{b: b}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A ") {
				s.rules++
			}
			for _, h := range hintChains {
				if strings.HasPrefix(line, ":"+h+" ") {
					s.hint = true
				}
			}
		}
		found = append(found, s)
	}
	if len(found) == 0 {
		return "", fmt.Errorf("xtables: no usable iptables for %s: %w", f, errors.Join(errs...))
	}
	for _, s := range found {
		if s.hint {
			return s.b, nil
		}
	}
	best := found[0]
	for _, s := range found[1:] {
		if s.rules > best.rules {
			best = s
		}
	}
	return best.b, nil
}
