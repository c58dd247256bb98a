package refdocs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// codeSpan is an inline code span that starts with a flag.
	codeSpan = regexp.MustCompile("`(--[a-z0-9*-]+)[^`]*`")
	// flagToken is a flag on a command line.
	flagToken = regexp.MustCompile(`(?:^|\s)(--[a-z0-9-]+)`)
)

// docFlags returns the flags a page names: every inline code span that
// starts with one, and every flag on a command line of a code block that
// runs a sink binary (one of sinks, or <sink>), continuation lines
// included.
func docFlags(page string, sinks []string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	inBlock, continued := false, false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock, continued = !inBlock, false
			continue
		}
		if !inBlock {
			continue
		}
		cmd, _, _ := strings.Cut(line, " #")
		runs := continued || strings.Contains(cmd, "<sink>")
		for _, s := range sinks {
			runs = runs || strings.Contains(cmd, "bin/"+s+" ") || strings.HasPrefix(strings.TrimSpace(cmd), s+" ")
		}
		if runs {
			for _, m := range flagToken.FindAllStringSubmatch(cmd, -1) {
				out = append(out, m[1])
			}
		}
		continued = runs && strings.HasSuffix(strings.TrimSpace(cmd), `\`)
	}
	return out
}

// TestDocFlags: every flag the hand-written pages under docs/ name is a
// flag of a sink binary (a name ending in * a prefix of one).
func TestDocFlags(t *testing.T) {
	names := []string{"--help", "--version"}
	var sinkNames []string
	for _, s := range Sinks() {
		sinkNames = append(sinkNames, s.Name)
		for _, f := range s.Table().Flags {
			for _, n := range f.Flag.Names() {
				names = append(names, "--"+n)
			}
		}
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range docFlags(string(b), sinkNames) {
			known := slices.Contains(names, f)
			if prefix, ok := strings.CutSuffix(f, "*"); ok {
				known = slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
			}
			if !known {
				t.Errorf("%s names %s, which no sink has", filepath.Base(p), f)
			}
		}
	}
}

// TestDocFlagsFinds: the scan sees inline flags and the flags of sink
// command lines, and not those of other commands.
func TestDocFlagsFinds(t *testing.T) {
	page := "Use `--weight 3` or `--conntrack-*`.\n\n```sh\nbin/iptables --dry-run \\\n  --node-name n1   # --not-this\nkubectl logs --tail=20\n/usr/local/bin/<sink> --cleanup\n```\n"
	got := docFlags(page, []string{"iptables"})
	want := []string{"--weight", "--conntrack-*", "--dry-run", "--node-name", "--cleanup"}
	if !slices.Equal(got, want) {
		t.Errorf("docFlags: %q, want %q", got, want)
	}
}
