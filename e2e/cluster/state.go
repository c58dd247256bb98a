package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
)

// A proxy's kernel state, as the differential test captures it in the VM:
// the guest prints each section after a line "=== <section>", and the
// capture ends at "=== end".
const (
	SectionIPVS     = "ipvsadm"           // ipvsadm -Sn
	SectionIPSet    = "ipset"             // ipset save
	SectionAddrs    = "kube-ipvs0"        // ip -o addr show dev kube-ipvs0
	SectionIPTables = "iptables"          // iptables-save (the nft backend, which both proxies use in the VM)
	SectionIP6      = "ip6tables"         // ip6tables-save
	SectionErrors   = "errors"            // the proxy's ERROR log lines (ErrorLine)
	sectionEnd      = "end"               //
	sectionPrefix   = "=== "              //
	captureStart    = "=== capture-start" // what precedes the sections
)

// CaptureScript is guest shell code printing the sections that
// ParseCapture reads (the proxy's log is /tmp/proxy.log).
const CaptureScript = `echo '` + captureStart + `'
echo '=== ` + SectionIPVS + `'; ipvsadm -Sn
echo '=== ` + SectionIPSet + `'; ipset save
echo '=== ` + SectionAddrs + `'; ip -o addr show dev kube-ipvs0 2>/dev/null
echo '=== ` + SectionIPTables + `'; iptables-save
echo '=== ` + SectionIP6 + `'; ip6tables-save
echo '=== ` + SectionErrors + `'; grep -h 'level=ERROR' /tmp/proxy.log 2>/dev/null
echo '=== ` + sectionEnd + `'
`

// State is a normalized capture: per section, a sorted list of lines.
type State map[string][]string

// ParseCapture finds the last capture in console output and normalizes it.
func ParseCapture(out string) (State, error) {
	i := strings.LastIndex(out, captureStart+"\n")
	if i < 0 {
		return nil, errors.New("cluster: no capture in the output")
	}
	st := State{}
	section, table := "", ""
	ended := false
	for _, line := range strings.Split(out[i+len(captureStart)+1:], "\n") {
		line = strings.TrimRight(line, "\r")
		if name, ok := strings.CutPrefix(line, sectionPrefix); ok {
			if name == sectionEnd {
				ended = true
				break
			}
			section = name
			st[section] = nil
			continue
		}
		if n, ok := normalize(section, line, &table, false); ok {
			st[section] = append(st[section], n)
		}
	}
	if !ended {
		return nil, errors.New("cluster: capture incomplete (no end marker)")
	}
	for k := range st {
		slices.Sort(st[k])
	}
	return st, nil
}

var (
	counters = regexp.MustCompile(`^\[\d+:\d+\]\s*|\s*\[\d+:\d+\]$`)
	comment  = regexp.MustCompile(` -m comment --comment ("[^"]*"|\S+)`)
	addr     = regexp.MustCompile(`\binet6? (\S+)`)
)

// normalize returns a section's line in comparable form, or false to drop
// it: ipset keeps "create <name> <type>" and "add" lines; addresses keep
// the address; iptables drops counters, COMMIT lines and (unless
// keepComments) comments, and prefixes each rule with its table (*table,
// set by the table's header).
func normalize(section, line string, table *string, keepComments bool) (string, bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", false
	}
	switch section {
	case SectionIPVS:
		return line, true
	case SectionIPSet:
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "create":
			return strings.Join(f[:3], " "), true
		case f[0] == "add":
			return line, true
		}
		return "", false
	case SectionAddrs:
		if m := addr.FindStringSubmatch(line); m != nil {
			return m[1], true
		}
		return "", false
	case SectionErrors:
		return ErrorLine(line)
	case SectionIPTables, SectionIP6:
		switch {
		case strings.HasPrefix(line, "#"), line == "COMMIT":
			return "", false
		case strings.HasPrefix(line, "*"):
			*table = line[1:]
			return "", false
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line)
			return *table + " " + strings.Join(f[:min(2, len(f))], " "), true
		}
		if !keepComments {
			line = comment.ReplaceAllString(line, "")
		}
		return *table + " " + counters.ReplaceAllString(line, ""), true
	}
	return "", false
}

// errorFields are the msg and error fields of a log/slog text line.
var errorFields = regexp.MustCompile(`\b(msg|error)=("(?:[^"\\]|\\.)*"|\S+)`)

// ErrorLine returns a sink's log line at level ERROR in comparable form,
// "ERROR msg=... error=..." (the error up to its first escaped newline;
// times and counters dropped), or false for any other line (kube-proxy's
// klog lines included).
func ErrorLine(line string) (string, bool) {
	if !strings.Contains(line, "level=ERROR") {
		return "", false
	}
	out := "ERROR"
	for _, m := range errorFields.FindAllStringSubmatch(line, -1) {
		v, _, cut := strings.Cut(m[2], `\n`)
		if cut {
			v += `"`
		}
		out += " " + m[1] + "=" + v
	}
	return out, true
}

// Normalize returns the comparable, sorted lines of one section's raw
// output (as ParseCapture normalizes each section of a VM capture, but
// keeping iptables comments when keepComments is set), for captures taken
// on the host (for example iptables-save in a network namespace).
func Normalize(section, output string, keepComments bool) []string {
	var out []string
	table := ""
	for _, line := range strings.Split(output, "\n") {
		if n, ok := normalize(section, line, &table, keepComments); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Chains returns the normalized rules of iptables-save output (section
// SectionIPTables or SectionIP6; comments kept when keepComments is set)
// by "<table> <chain>", in their order in the chain, for the order checks
// that the sorted State leaves out.
func Chains(section, output string, keepComments bool) map[string][]string {
	out := map[string][]string{}
	table := ""
	for _, line := range strings.Split(output, "\n") {
		n, ok := normalize(section, line, &table, keepComments)
		if !ok {
			continue
		}
		f := strings.Fields(n)
		if len(f) >= 3 && f[1] == "-A" {
			key := f[0] + " " + f[2]
			out[key] = append(out[key], n)
		}
	}
	return out
}

// OrderDifferences returns, for each chain whose rules are the same set in
// ref and got but in another order, a line "<table> <chain>" (sorted).
// The rules of chains in independent may come in any order; those of
// chains in lastFixed too but for the last ones: the trailing rules that
// jump where ref's last rule jumps (KUBE-SERVICES' node-port rules, one
// per node address, in kube-proxy's map order) stay last, in any order.
func OrderDifferences(ref, got map[string][]string, independent, lastFixed []string) []string {
	var out []string
	for key, r := range ref {
		g, ok := got[key]
		if !ok || len(g) != len(r) || slices.Equal(r, g) {
			continue
		}
		if !slices.Equal(slices.Sorted(slices.Values(r)), slices.Sorted(slices.Values(g))) {
			continue // a content difference, which Diff reports
		}
		if slices.Contains(independent, key) || slices.Contains(lastFixed, key) && sameTail(r, g) {
			continue
		}
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}

// sameTail reports whether got ends with the same rules as ref's trailing
// run of rules that jump to the target of ref's last rule, in any order.
func sameTail(ref, got []string) bool {
	_, target, _ := strings.Cut(ref[len(ref)-1], " -j ")
	n := 0
	for n < len(ref) && strings.HasSuffix(ref[len(ref)-1-n], " -j "+target) {
		n++
	}
	tail := func(rules []string) []string { return slices.Sorted(slices.Values(rules[len(rules)-n:])) }
	return slices.Equal(tail(ref), tail(got))
}

// Difference is one line present in one capture only.
type Difference struct {
	Section string
	// Side is "-" for a line only the reference (kube-proxy) has, "+" for
	// one only the sink has.
	Side string
	Line string
}

func (d Difference) String() string { return d.Section + " " + d.Side + " " + d.Line }

// Diff returns the lines of ref missing from got ("-") and the lines of
// got missing from ref ("+"), by section in name order.
func Diff(ref, got State) []Difference {
	var names []string
	for k := range ref {
		names = append(names, k)
	}
	for k := range got {
		if _, ok := ref[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []Difference
	for _, s := range names {
		count := map[string]int{}
		for _, l := range ref[s] {
			count[l]++
		}
		for _, l := range got[s] {
			count[l]--
		}
		for _, l := range ref[s] {
			if count[l] > 0 {
				out = append(out, Difference{s, "-", l})
				count[l]--
			}
		}
		for _, l := range got[s] {
			if count[l] < 0 {
				out = append(out, Difference{s, "+", l})
				count[l]++
			}
		}
	}
	return out
}

// Intended is a reviewed difference between kube-proxy and a sink, with
// its reason.
type Intended struct {
	Sink   string
	Diff   Difference
	Reason string
}

// ReadIntended reads a list of intended differences: blocks separated by
// blank lines, each one or more "# reason" lines followed by entries
// "<sink> <section> <-|+> <normalized line>" (<sink> is a path.Match
// pattern such as "ipvs-*"; a line ending in "*" is a prefix, see
// Unexplained).
func ReadIntended(path string) ([]Intended, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: intended differences: %w", err)
	}
	defer f.Close()
	var out []Intended
	var reason []string
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "":
			reason = nil
		case strings.HasPrefix(line, "#"):
			reason = append(reason, strings.TrimSpace(line[1:]))
		default:
			f := strings.SplitN(line, " ", 4)
			if len(f) != 4 || (f[2] != "-" && f[2] != "+") {
				return nil, fmt.Errorf("cluster: %s:%d: want \"<sink> <section> <-|+> <line>\"", path, n)
			}
			if len(reason) == 0 {
				return nil, fmt.Errorf("cluster: %s:%d: entry without a reason", path, n)
			}
			out = append(out, Intended{Sink: f[0], Diff: Difference{Section: f[1], Side: f[2], Line: f[3]}, Reason: strings.Join(reason, " ")})
		}
	}
	return out, s.Err()
}

// Unexplained returns the differences of sink not in the intended list,
// and the intended entries of sink that did not occur (stale entries). An
// entry whose line ends in "*" covers every line of its section and side
// starting with what precedes the "*".
func Unexplained(sink string, diffs []Difference, intended []Intended) (unexplained []Difference, stale []Intended) {
	used := make([]bool, len(intended))
	for _, d := range diffs {
		explained := false
		for i, in := range intended {
			if in.matches(sink) && in.Diff.covers(d) {
				used[i], explained = true, true
			}
		}
		if !explained {
			unexplained = append(unexplained, d)
		}
	}
	for i, in := range intended {
		if in.matches(sink) && !used[i] {
			stale = append(stale, in)
		}
	}
	return unexplained, stale
}

// matches reports whether the entry is about sink (its Sink is a
// path.Match pattern).
func (in Intended) matches(sink string) bool {
	ok, err := path.Match(in.Sink, sink)
	return err == nil && ok
}

// covers reports whether the intended difference e covers d.
func (e Difference) covers(d Difference) bool {
	if e.Section != d.Section || e.Side != d.Side {
		return false
	}
	if prefix, ok := strings.CutSuffix(e.Line, "*"); ok {
		return strings.HasPrefix(d.Line, prefix)
	}
	return e.Line == d.Line
}
