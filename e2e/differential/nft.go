package differential

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The sections of an nftables capture (captureNFT): the tables present,
// and the kube-proxy table of each family, normalized by NormalizeNFT.
const (
	SectionNFTTables = "nft-tables" // nft list tables
	SectionNFT       = "nft-ip"     // nft list table ip kube-proxy
	SectionNFT6      = "nft-ip6"    // nft list table ip6 kube-proxy
)

var (
	// nftCounter is an anonymous counter's state in a rule or element.
	nftCounter = regexp.MustCompile(`\bcounter packets \d+ bytes \d+`)
	// nftExpires is a dynamic element's time left.
	nftExpires = regexp.MustCompile(` expires [0-9dhms]+`)
	// nftObject is the opening line of a table's object: its kind and
	// name (quoted when nft quotes it).
	nftObject = regexp.MustCompile(`^(chain|set|map|counter|flowtable|quota|limit|ct helper|ct timeout|ct expectation|secmark|synproxy) ("[^"]*"|\S+) \{$`)
	// nftObjectCounters are a named counter's values.
	nftObjectCounters = regexp.MustCompile(`^packets \d+ bytes \d+$`)
)

// NFTListing is a parsed `nft list table` output: the normalized lines
// (sorted) and each chain's rules in their order, keyed "chain <name>".
// The host tests of the nftables sink compare tables with it too.
type NFTListing struct {
	Lines  []string
	Chains map[string][]string
}

// NormalizeNFT parses the output of `nft list table <family> <name>`
// (nft v1.0.6, no handles) into comparable lines, one per fact, each
// prefixed by its object: "table: <property>", "chain <name>" and
// "chain <name>: <property or rule>", "set <name>: <property>" and
// "set <name>: element <element>" (maps likewise), "counter <name>:
// <property>". Counter values and dynamic elements' expiry are dropped;
// the lines are sorted, elements one line each (so their order goes),
// while Chains keeps each chain's rules (not its properties) in order.
func NormalizeNFT(out string) NFTListing {
	l := NFTListing{Chains: map[string][]string{}}
	var object, kind string
	var elements strings.Builder
	inElements := false
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(raw)
		if inElements {
			elements.WriteString(" " + line)
			if strings.HasSuffix(line, "}") {
				inElements = false
				l.addElements(object, elements.String())
			}
			continue
		}
		switch {
		case line == "":
		case strings.HasPrefix(line, "table "):
			object = "table"
		case line == "}":
			object = "table"
		case nftObject.MatchString(line):
			m := nftObject.FindStringSubmatch(line)
			kind, object = m[1], m[1]+" "+strings.Trim(m[2], `"`)
			l.Lines = append(l.Lines, object)
		case strings.HasPrefix(line, "elements = {"):
			elements.Reset()
			elements.WriteString(line)
			if inElements = !strings.HasSuffix(line, "}"); !inElements {
				l.addElements(object, elements.String())
			}
		case kind == "counter" && nftObjectCounters.MatchString(line):
		default:
			line = nftCounter.ReplaceAllString(line, "counter")
			l.Lines = append(l.Lines, object+": "+line)
			if kind == "chain" && object != "table" && !nftChainProperty(line) {
				l.Chains[object] = append(l.Chains[object], line)
			}
		}
		if object == "table" {
			kind = ""
		}
	}
	slices.Sort(l.Lines)
	return l
}

// nftChainProperty reports whether a line of a chain's block is one of
// its properties (base chain type, hook, priority and policy; comment)
// rather than a rule.
func nftChainProperty(line string) bool {
	return strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "comment ") || strings.HasPrefix(line, "policy ")
}

// addElements adds a line per element of "elements = { a, b, ... }".
func (l *NFTListing) addElements(object, text string) {
	text = strings.TrimPrefix(text, "elements = {")
	text = strings.TrimSuffix(text, "}")
	for _, e := range splitTopLevel(text) {
		e = nftCounter.ReplaceAllString(nftExpires.ReplaceAllString(e, ""), "counter")
		if e = strings.Join(strings.Fields(e), " "); e != "" {
			l.Lines = append(l.Lines, object+": element "+e)
		}
	}
}

// splitTopLevel splits s at the commas outside quotes and braces.
func splitTopLevel(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '{':
			depth++
		case r == '}':
			depth--
		case r == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// nftKernel reads the tables of the namespace (SectionNFTTables) and
// kube-proxy's table of each family (SectionNFT, SectionNFT6), with the
// host's nft.
var nftKernel = hostKernel{
	tools: []string{"nft"},
	read:  readNFT,
	synced: func(st cluster.State) bool {
		for _, section := range []string{SectionNFT, SectionNFT6} {
			for _, l := range st[section] {
				if strings.HasPrefix(l, "chain service-") {
					return true
				}
			}
		}
		return false
	},
}

// readNFT lists the namespace's tables and the kube-proxy table of each
// family (absent: no lines) and normalizes them (NormalizeNFT).
func readNFT(t *testing.T, ns *nstest.NetNS) (cluster.State, map[string]map[string][]string) {
	t.Helper()
	st, chains := cluster.State{}, map[string]map[string][]string{}
	tables := strings.Split(strings.TrimSpace(ns.MustRun(t, "nft", "list", "tables")), "\n")
	st[SectionNFTTables] = slices.Sorted(slices.Values(slices.DeleteFunc(tables, func(s string) bool { return s == "" })))
	for section, family := range map[string]string{SectionNFT: "ip", SectionNFT6: "ip6"} {
		out, err := ns.Run("nft", "list", "table", family, "kube-proxy")
		if err != nil {
			if strings.Contains(out, "No such file or directory") {
				st[section] = nil
				continue
			}
			t.Fatal(err)
		}
		l := NormalizeNFT(out)
		st[section], chains[section] = l.Lines, l.Chains
	}
	return st, chains
}

// captureNFT runs a proxy of the nftables mode on a fresh node of this
// host (captureOn) and returns its nftables state: the tables, and
// kube-proxy's table of each family.
func captureNFT(e *Env, bin string, args ...string) Capture {
	e.T.Helper()
	return captureOn(e, nftKernel, bin, args...)
}
