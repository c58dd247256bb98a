package runtime_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// helpGroups returns the flags --help lists under each category heading
// (a line that is neither a flag nor empty, after GLOBAL OPTIONS), each
// flag by its first name.
func helpGroups(help string) map[string][]string {
	groups := map[string][]string{}
	_, opts, _ := strings.Cut(help, "GLOBAL OPTIONS:")
	heading := ""
	for _, line := range strings.Split(opts, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "-"):
			name := strings.TrimLeft(strings.Fields(line)[0], "-")
			groups[heading] = append(groups[heading], strings.TrimSuffix(name, ","))
		default:
			heading = line
		}
	}
	return groups
}

// TestHelpGroups: every sink's --help lists each flag it honours once,
// under kube-proxy's heading when one of its names is a kube-proxy flag
// and under the sink's own otherwise; the flags it does not honour are not
// listed.
func TestHelpGroups(t *testing.T) {
	for _, s := range registered {
		t.Run(s.Name, func(t *testing.T) {
			var out bytes.Buffer
			if status := runtime.Main(s, []string{s.Name, "--help"}, &out, io.Discard); status != 0 {
				t.Fatalf("--help: exit status %d", status)
			}
			groups := helpGroups(out.String())
			where := map[string][]string{}
			for heading, names := range groups {
				for _, n := range names {
					where[n] = append(where[n], heading)
				}
			}
			for _, f := range s.Table().Flags {
				got := where[f.Name()]
				want := runtime.CategoryOwn
				if runtime.KubeProxyName(f.Flag) != "" {
					want = runtime.CategoryKubeProxy
				}
				if c := runtime.Category(f.Flag); c != want {
					t.Errorf("--%s: Category %q, want %q", f.Name(), c, want)
				}
				switch {
				case f.Class != kpconfig.Honoured && len(got) > 0:
					t.Errorf("--%s (%s) listed under %q", f.Name(), f.Class, got)
				case f.Class == kpconfig.Honoured && (len(got) != 1 || got[0] != want):
					t.Errorf("--%s listed under %q, want once under %q", f.Name(), got, want)
				}
			}
			if len(groups[runtime.CategoryKubeProxy]) == 0 || len(groups[runtime.CategoryOwn]) == 0 {
				t.Errorf("--help lacks a group: %v\n%s", groups, out.String())
			}
		})
	}
}

// TestHelpGroupsParse: the parse of --help sees the headings and the flags
// under them.
func TestHelpGroupsParse(t *testing.T) {
	help := "GLOBAL OPTIONS:\n   --help, -h  show help\n\n   a group\n\n   --x value, --y value  usage\n   -v value  v\n\n   b\n\n   --z  z\n"
	got := helpGroups(help)
	if strings.Join(got[""], " ") != "help" || strings.Join(got["a group"], " ") != "x v" || strings.Join(got["b"], " ") != "z" {
		t.Errorf("helpGroups: %v", got)
	}
}
