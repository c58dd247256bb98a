package rules

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// Installer keeps a family's rules installed with one backend.
type Installer struct {
	Backend xtables.Backend
	Run     xtables.Runner
	// Writes counts iptables-restore runs, for metrics and tests.
	Writes int
}

// table is one table's state as iptables-save prints it.
type table struct {
	chains map[string]bool
	rules  map[string][]string // chain -> rule lines in order
}

func (in *Installer) read(f xtables.Family, name string) (table, error) {
	out, err := in.Run(in.Backend.Command(f, "save"), []string{"-t", name}, nil)
	if err != nil {
		return table{}, fmt.Errorf("rules: read %s table %s: %w", f, name, err)
	}
	t := table{chains: map[string]bool{}, rules: map[string][]string{}}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			chain, _, _ := strings.Cut(line[1:], " ")
			t.chains[chain] = true
		case strings.HasPrefix(line, "-A "):
			chain, _, _ := strings.Cut(line[3:], " ")
			t.rules[chain] = append(t.rules[chain], line)
		}
	}
	return t, nil
}

// diff returns the restore input that brings one table to the ruleset, or
// nil when it already matches.
func diff(rs Ruleset, name string, have table) []byte {
	var missing []Jump
	for _, j := range rs.Jumps {
		if j.Table == name && !slices.Contains(have.rules[j.From], j.Rule().String()) {
			missing = append(missing, j)
		}
	}
	same := len(missing) == 0
	for _, chain := range rs.Chains[name] {
		if !have.chains[chain] || !slices.Equal(have.rules[chain], wantLines(rs, name, chain)) {
			same = false
		}
	}
	if same {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%s\n", name)
	// With --noflush, declaring a chain creates it or flushes it: our
	// chains are rewritten whole, every other chain is untouched.
	for _, chain := range rs.Chains[name] {
		fmt.Fprintf(&b, ":%s - [0:0]\n", chain)
	}
	for _, chain := range rs.Chains[name] {
		for _, l := range wantLines(rs, name, chain) {
			b.WriteString(l + "\n")
		}
	}
	// Missing jumps go to the top of their built-in chain, in declared order.
	for i := len(missing) - 1; i >= 0; i-- {
		j := missing[i]
		fmt.Fprintf(&b, "-I %s 1 %s\n", j.From, strings.TrimPrefix(j.Rule().String(), "-A "+j.From+" "))
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

func wantLines(rs Ruleset, name, chain string) []string {
	var out []string
	for _, r := range rs.Rules {
		if r.Table == name && r.Chain == chain {
			out = append(out, r.String())
		}
	}
	return out
}

func tables(rs Ruleset) []string {
	names := make([]string, 0, len(rs.Chains))
	for t := range rs.Chains {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}

// Ensure installs the ruleset if the kernel's rules differ from it, with one
// iptables-restore --noflush for all tables that differ, and reports whether
// it wrote anything. After writing, it reads the rules back and fails if
// they still differ.
func (in *Installer) Ensure(rs Ruleset) (bool, error) {
	input, err := in.pending(rs)
	if err != nil || input == nil {
		return false, err
	}
	in.Writes++
	if _, err := in.Run(in.Backend.Command(rs.Family, "restore"), in.Backend.RestoreArgs(), input); err != nil {
		return true, fmt.Errorf("rules: install %s rules: %w", rs.Family, err)
	}
	left, err := in.pending(rs)
	if err != nil {
		return true, err
	}
	if left != nil {
		return true, fmt.Errorf("rules: %s rules still differ after install; wanted:\n%s", rs.Family, left)
	}
	return true, nil
}

// pending returns the restore input for every table that differs, or nil.
func (in *Installer) pending(rs Ruleset) ([]byte, error) {
	var input []byte
	for _, name := range tables(rs) {
		have, err := in.read(rs.Family, name)
		if err != nil {
			return nil, err
		}
		input = append(input, diff(rs, name, have)...)
	}
	return input, nil
}

// Remove deletes the ruleset's jumps and chains, leaving every other rule in
// place. Rules or chains already gone are not an error.
func (in *Installer) Remove(rs Ruleset) error {
	var b bytes.Buffer
	for _, name := range tables(rs) {
		have, err := in.read(rs.Family, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "*%s\n", name)
		for _, j := range rs.Jumps {
			if j.Table == name && slices.Contains(have.rules[j.From], j.Rule().String()) {
				fmt.Fprintf(&b, "-D %s\n", strings.TrimPrefix(j.Rule().String(), "-A "))
			}
		}
		var present []string
		for _, chain := range rs.Chains[name] {
			if have.chains[chain] {
				present = append(present, chain)
				fmt.Fprintf(&b, ":%s - [0:0]\n", chain)
			}
		}
		for _, chain := range present {
			fmt.Fprintf(&b, "-X %s\n", chain)
		}
		b.WriteString("COMMIT\n")
	}
	in.Writes++
	if _, err := in.Run(in.Backend.Command(rs.Family, "restore"), in.Backend.RestoreArgs(), b.Bytes()); err != nil {
		return fmt.Errorf("rules: remove %s rules: %w", rs.Family, err)
	}
	return nil
}
