package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/urfave/cli/v2"
)

// Flag is a flag a sink classes: one of its own (Honoured), or one of
// another sink's that it ignores or refuses.
type Flag struct {
	// Flag is the flag's definition. A flag the sink does not honour is
	// defined with its owner's kind and names (so that it parses as it does
	// there, and giving it is refused or ignored by name) and is hidden from
	// --help.
	Flag  cli.Flag
	Class kpconfig.Class
	// Why is, for an ignored flag, the reason its warning gives; for a
	// refused one, when set, it replaces "does not apply to proxy mode
	// <mode>; remove it".
	Why string
	// File is the KubeProxyConfiguration field the flag maps onto ("" for
	// none). Given with --config, such a flag is dropped (logged once), as
	// kube-proxy ignores it then, unless OverFile. Sink.Table fills it for
	// a flag a field of the table sets.
	File string
	// OverFile: the flag applies over the file, as kube-proxy applies
	// --hostname-override and its logging flags.
	OverFile bool
}

// Name returns the flag's name (its first: the one the sink reads).
func (f Flag) Name() string { return f.Flag.Names()[0] }

// Classed returns flags, each in class c.
func Classed(c kpconfig.Class, flags ...cli.Flag) []Flag {
	out := make([]Flag, 0, len(flags))
	for _, f := range flags {
		out = append(out, Flag{Flag: f, Class: c})
	}
	return out
}

// Table is a sink's classification of every kube-proxy flag and
// KubeProxyConfiguration field it knows, which the runtime applies at
// start: an honoured setting takes effect, an ignored one is logged once, a
// refused one is an error naming it.
type Table struct {
	// Flags are the runtime's flags (every sink honours them), then the
	// sink's (Sink.Flags).
	Flags []Flag
	// Fields are kpconfig.Table of the sink's mode and fields
	// (Sink.Fields).
	Fields []kpconfig.Field
}

// Table returns the sink's table: the runtime's flags, kube-proxy's that
// they do not hold (kubeProxyFlags), then the sink's. Each call defines
// new flags (a parse sets them).
func (s Sink) Table() Table {
	t := Table{Flags: sharedTable()}
	for _, f := range t.Flags {
		prepare(f.Flag, false)
	}
	for _, f := range kubeProxyFlags(s.Mode) {
		prepare(f.Flag, f.Class != kpconfig.Honoured)
		t.Flags = append(t.Flags, f)
	}
	if s.Flags != nil {
		for _, f := range s.Flags() {
			prepare(f.Flag, f.Class != kpconfig.Honoured)
			t.Flags = append(t.Flags, f)
		}
	}
	t.Fields = kpconfig.Table(s.Mode, s.Fields)
	for i, f := range t.Flags {
		if f.File != "" {
			continue
		}
		for _, field := range t.Fields {
			if field.Flag != "" && slices.Contains(f.Flag.Names(), field.Flag) {
				t.Flags[i].File = field.Name
				break
			}
		}
	}
	return t
}

// sharedTable is the runtime's flags, honoured; those kube-proxy applies
// over --config say so (OverFile).
func sharedTable() []Flag {
	t := Classed(kpconfig.Honoured, sharedFlags()...)
	for i, f := range t {
		switch f.Name() {
		case "node-name", "log-format", "log-level":
			t[i].OverFile = true
		}
	}
	return t
}

// droppedByConfig returns the flags c was given that --config replaces
// (Flag.File, not OverFile); none without --config.
func (t Table) droppedByConfig(c *cli.Context) []Flag {
	if c.String("config") == "" {
		return nil
	}
	var out []Flag
	for _, f := range t.Flags {
		if f.File != "" && !f.OverFile && c.IsSet(f.Name()) {
			out = append(out, f)
		}
	}
	return out
}

// lookup returns the flag one of whose names is name.
func (t Table) lookup(name string) (Flag, bool) {
	for _, f := range t.Flags {
		if slices.Contains(f.Flag.Names(), name) {
			return f, true
		}
	}
	return Flag{}, false
}

// Flags returns the command-line flags of sink: the runtime's, then the
// sink's, each also settable by environment variable (EnvVars); those
// the sink does not honour are hidden from --help.
func Flags(sink Sink) []cli.Flag { return sink.Table().cliFlags() }

func (t Table) cliFlags() []cli.Flag {
	fs := make([]cli.Flag, 0, len(t.Flags))
	for _, f := range t.Flags {
		fs = append(fs, f.Flag)
	}
	return fs
}

// notHonoured returns the names of the flags the sink ignores or refuses.
func (t Table) notHonoured() []string {
	var names []string
	for _, f := range t.Flags {
		if f.Class != kpconfig.Honoured {
			names = append(names, f.Name())
		}
	}
	return names
}

// check applies the flags' classes to what c was given: a refused flag is
// an error naming it, an ignored one a warning.
func (t Table) check(c *cli.Context, mode string) ([]string, error) {
	var warnings []string
	for _, f := range t.Flags {
		if f.Class == kpconfig.Honoured || !c.IsSet(f.Name()) {
			continue
		}
		switch f.Class {
		case kpconfig.Ignored:
			warnings = append(warnings, fmt.Sprintf("--%s ignored: %s", f.Name(), f.Why))
		case kpconfig.Refused:
			why := f.Why
			if why == "" {
				why = fmt.Sprintf("does not apply to proxy mode %q; remove it", mode)
			}
			return nil, fmt.Errorf("--%s: %s", f.Name(), why)
		default:
			return nil, fmt.Errorf("--%s: has no class for proxy mode %q", f.Name(), mode)
		}
	}
	return warnings, nil
}

// prepare gives a flag of the kinds the sinks use its environment variable
// (EnvVars of its name) when it has none and its --help category (kube-proxy's
// or the sink's own), and hides it from --help when hidden; it reports false
// for another kind.
func prepare(f cli.Flag, hidden bool) bool {
	cat := Category(f)
	switch f := f.(type) {
	case *cli.StringFlag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	case *cli.BoolFlag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	case *cli.DurationFlag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	case *cli.IntFlag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	case *cli.Int64Flag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	case *cli.Float64Flag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	case *cli.StringSliceFlag:
		setup(&f.EnvVars, &f.Hidden, &f.Category, cat, f.Name, hidden)
	default:
		return false
	}
	return true
}

func setup(env *[]string, hide *bool, cat *string, category, name string, hidden bool) {
	if len(*env) == 0 {
		*env = EnvVars(name)
	}
	*hide = *hide || hidden
	*cat = category
}

// unbindEnv takes the environment variables off f (a flag --config
// replaces, which the environment must not set either); it reports false
// for a kind it does not know.
func unbindEnv(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.EnvVars = nil
	case *cli.BoolFlag:
		f.EnvVars = nil
	case *cli.DurationFlag:
		f.EnvVars = nil
	case *cli.IntFlag:
		f.EnvVars = nil
	case *cli.Int64Flag:
		f.EnvVars = nil
	case *cli.Float64Flag:
		f.EnvVars = nil
	case *cli.StringSliceFlag:
		f.EnvVars = nil
	default:
		return false
	}
	return true
}

// isBool reports whether f takes no value (-flag alone sets it).
func isBool(f cli.Flag) bool {
	_, ok := f.(*cli.BoolFlag)
	return ok
}

// withoutFlags returns args without the flags named in drop (any of their
// names) and their values, following the flag package's syntax: -name or
// --name, with =value or, for a flag that takes one, the next argument;
// parsing stops at "--" or at the first argument that is not a flag. args[0]
// is the program's name.
func (t Table) withoutFlags(args []string, drop []Flag) []string {
	out := []string{args[0]}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f, known := t.lookup(name)
		takesNext := known && !hasValue && !isBool(f.Flag) && i+1 < len(args)
		if known && slices.ContainsFunc(drop, func(d Flag) bool { return d.Name() == f.Name() }) {
			if takesNext {
				i++
			}
			continue
		}
		out = append(out, a)
		if takesNext {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
