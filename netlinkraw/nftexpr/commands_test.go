package nftexpr

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// parseCommands reads a script of `add table|set|map|chain|rule|element`
// commands (one per line, as knftables writes them) into a scriptTable.
func parseCommands(t *testing.T, script string) *scriptTable {
	t.Helper()
	st := &scriptTable{}
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 5)
		if len(f) < 4 || f[0] != "add" {
			t.Fatalf("unknown command %q", line)
		}
		fam := nft.FamilyIPv4
		if f[2] == "ip6" {
			fam = nft.FamilyIPv6
		}
		st.family = fam
		rest := ""
		if len(f) == 5 {
			rest = f[4]
		}
		switch f[1] {
		case "table":
			name, body, _ := strings.Cut(f[3]+" "+rest, " ")
			st.name = name
			st.comment = bodyField(body, "comment")
		case "set", "map":
			name, body, _ := strings.Cut(rest, " ")
			d := SetDef{Name: name, Type: bodyField(body, "type"), Comment: bodyField(body, "comment")}
			if fl := bodyField(body, "flags"); fl != "" {
				d.Flags = strings.Split(fl, ",")
			}
			if to := bodyField(body, "timeout"); to != "" {
				n, err := strconv.Atoi(strings.TrimSuffix(to, "s"))
				if err != nil {
					t.Fatalf("timeout in %q", line)
				}
				d.Timeout = time.Duration(n) * time.Second
			}
			st.sets = append(st.sets, d)
		case "chain":
			name, body, _ := strings.Cut(rest, " ")
			c := chainDef{name: name, comment: bodyField(body, "comment")}
			if typ := bodyField(body, "type"); typ != "" {
				w := strings.Fields(typ) // "nat hook prerouting priority -100"
				c.typ, c.hook, c.prio = w[0], w[2], strings.Join(w[4:], " ")
			}
			st.chains = append(st.chains, c)
		case "rule":
			chain, text, _ := strings.Cut(rest, " ")
			r := ruleDef{chain: chain, text: text}
			if i := strings.LastIndex(text, ` comment "`); i >= 0 {
				r.text, r.comment = text[:i], strings.Trim(text[i+len(` comment `):], `"`)
			}
			st.rules = append(st.rules, r)
		case "element":
			set, body, _ := strings.Cut(rest, " ")
			body = strings.TrimSuffix(strings.TrimPrefix(body, "{ "), " }")
			e := elemDef{set: set}
			if k, v, ok := strings.Cut(body, " : "); ok {
				body, e.value = k, v
			}
			if k, c, ok := strings.Cut(body, ` comment "`); ok {
				body, e.comment = k, strings.TrimSuffix(c, `"`)
			}
			e.key = body
			st.elems = append(st.elems, e)
		default:
			t.Fatalf("unknown command %q", line)
		}
	}
	return st
}

// bodyField returns a field of a `{ key value ; ... }` body.
func bodyField(body, key string) string {
	body = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(body), "{"), "}")
	for _, part := range strings.Split(body, ";") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, key+" "); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// TestKubeProxyExpectedRulesets compiles kube-proxy v1.37.2's own expected
// rulesets (its TestOverallNFTablesRules output, IPv4 and IPv6, kept by
// nftables/ruleset as its golden files) and checks them against nft. It
// skips when those files are not in the tree.
func TestKubeProxyExpectedRulesets(t *testing.T) {
	for _, name := range []string{"overall-ipv4.nft", "overall-ipv6.nft"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "nftables", "ruleset", "testdata", name))
			if err != nil {
				t.Skipf("kube-proxy's expected ruleset: %v", err)
			}
			st := parseCommands(t, string(b))
			if len(st.rules) < 30 || len(st.elems) < 20 {
				t.Fatalf("parsed %d rules and %d elements only", len(st.rules), len(st.elems))
			}
			checkOracle(t, st)
		})
	}
}
