package refdocs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// FlagsPage renders docs/reference/flags.md: every flag of every sink, in
// the two groups of --help (kube-proxy-compatible, the sink's own), with
// its default, environment variable, what each mode's sinks do with it and
// whether it applies with --config.
func FlagsPage(sinks []runtime.Sink) (string, error) {
	ms, err := modes(sinks)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header("Flags"))
	b.WriteString("Every flag of the sink binaries (`ipvs-fullstate`, `ipvs-incremental`, `iptables`, `nftables`), as each takes it. `--help` shows the two groups below, and only the flags the sink honours; every flag is also read from its environment variable (a flag given on the command line wins). A sink accepts every other sink's flags and every kube-proxy flag so that one command line or DaemonSet works for all: *honoured* takes effect, *ignored* is logged once at start (a warning naming the flag and why), *refused* stops the sink with exit status 2 and a message naming the flag.\n\n")
	b.WriteString("\"With --config\" is kube-proxy's precedence, which the sinks follow: a flag that maps onto a field of the configuration file is dropped (logged once) when `--config` is given. The fields are in [config.md](config.md).\n")
	for _, cat := range []string{runtime.CategoryKubeProxy, runtime.CategoryOwn} {
		fmt.Fprintf(&b, "\n## %s\n\n", strings.ToUpper(cat[:1])+cat[1:])
		b.WriteString(row(append(append([]string{"flag", "default", "environment"}, heads(ms)...), "with --config", "description")...))
		b.WriteString(row(slices.Repeat([]string{"---"}, len(ms)+5)...))
		for _, name := range flagNames(ms, cat) {
			b.WriteString(flagRow(ms, name))
		}
	}
	return b.String(), nil
}

// flagNames returns the names of the flags of the modes' tables in
// category cat, sorted.
func flagNames(ms []mode, cat string) []string {
	var names []string
	for _, m := range ms {
		for _, f := range m.Table.Flags {
			if !slices.Contains(names, f.Name()) && runtime.Category(f.Flag) == cat {
				names = append(names, f.Name())
			}
		}
	}
	slices.Sort(names)
	return names
}

// flagRow renders the flag named name.
func flagRow(ms []mode, name string) string {
	var names, defaults, env, usage, files []string
	cells := make([]string, 0, len(ms))
	withConfig := true
	for _, m := range ms {
		i := slices.IndexFunc(m.Table.Flags, func(f runtime.Flag) bool { return f.Name() == name })
		if i < 0 {
			cells = append(cells, "unknown flag (exit 2)")
			continue
		}
		f := m.Table.Flags[i]
		cells = append(cells, classCell(f))
		for _, n := range f.Flag.Names() {
			if n := "`--" + n + "`"; !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		d, ok := f.Flag.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		if e := strings.Join(d.GetEnvVars(), ", "); e != "" && !slices.Contains(env, "`"+e+"`") {
			env = append(env, "`"+e+"`")
		}
		if f.File != "" && !f.OverFile {
			withConfig = false
			if file := m.Sink.Mode + " mode: `" + f.File + "`"; !slices.Contains(files, file) {
				files = append(files, file)
			}
		}
		if f.Class != kpconfig.Honoured {
			continue
		}
		if v := d.GetDefaultText(); v != "" && !slices.Contains(defaults, m.Sink.Mode+" mode: `"+v+"`") {
			defaults = append(defaults, m.Sink.Mode+" mode: `"+v+"`")
		}
		if u := oneLine(d.GetUsage()); u != "" && !slices.Contains(usage, u) {
			usage = append(usage, u)
		}
	}
	out := []string{strings.Join(names, ", "), joinModes(defaults), orDash(strings.Join(env, ", "))}
	out = append(out, cells...)
	switch {
	case withConfig:
		out = append(out, "applies")
	default:
		out = append(out, "dropped: the file's "+joinModes(files))
	}
	return row(append(out, orDash(strings.Join(usage, " / ")))...)
}

// joinModes joins per-mode values ("<mode> mode: v"); when they are one
// value, or one mode's, without the mode.
func joinModes(vs []string) string {
	if len(vs) == 0 {
		return "—"
	}
	_, first, _ := strings.Cut(vs[0], ": ")
	same := true
	for _, v := range vs[1:] {
		if _, val, _ := strings.Cut(v, ": "); val != first {
			same = false
		}
	}
	if same {
		return first
	}
	return strings.Join(vs, "; ")
}

// classCell says what a sink does with a flag.
func classCell(f runtime.Flag) string {
	switch f.Class {
	case kpconfig.Honoured:
		return "honoured"
	case kpconfig.Refused:
		why := f.Why
		if why == "" {
			why = "does not apply to this proxy mode"
		}
		return "refused: " + why
	}
	return fmt.Sprintf("%s: %s", f.Class, f.Why)
}

// orDash returns s, or "—" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
