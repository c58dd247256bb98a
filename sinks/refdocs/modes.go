package refdocs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// mode is the sinks of one proxy mode, which share one table (a flag or
// field is taken alike by every sink of a mode).
type mode struct {
	// Head is the column's heading: the mode and its sinks.
	Head  string
	Table runtime.Table
	Sink  runtime.Sink
}

// modes returns one column per mode, in the order of sinks' first sink of
// each; sinks of one mode with different tables are an error.
func modes(sinks []runtime.Sink) ([]mode, error) {
	var out []mode
	var names [][]string
	for _, s := range sinks {
		i := slices.IndexFunc(out, func(m mode) bool { return m.Sink.Mode == s.Mode })
		if i < 0 {
			out = append(out, mode{Table: s.Table(), Sink: s})
			names = append(names, []string{s.Name})
			continue
		}
		if a, b := describeTable(out[i].Table), describeTable(s.Table()); a != b {
			return nil, fmt.Errorf("%s and %s are both %s sinks with different tables", out[i].Sink.Name, s.Name, s.Mode)
		}
		names[i] = append(names[i], s.Name)
	}
	for i := range out {
		out[i].Head = fmt.Sprintf("%s mode (%s)", out[i].Sink.Mode, strings.Join(names[i], ", "))
	}
	return out, nil
}

// describeTable is a table's classes in text, to compare two tables.
func describeTable(t runtime.Table) string {
	var b strings.Builder
	for _, f := range t.Flags {
		fmt.Fprintf(&b, "%v %s %s %s %t %s\n", f.Flag.Names(), f.Class, f.Why, f.File, f.OverFile, f.Flag)
	}
	for _, f := range t.Fields {
		fmt.Fprintf(&b, "%s %v %s %s %s %s\n", f.Name, f.Covers(), f.Class, f.Flag, f.Why, f.Accepts)
	}
	return b.String()
}

// heads returns the modes' headings.
func heads(ms []mode) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Head
	}
	return out
}
