package runtime_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/sinks/iptablessink"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/refdocs"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// registered are the sinks of the binaries under sinks/ (their main.go
// builds each the same way; the reference pages list them);
// TestRegisteredSinks keeps the list whole.
var registered = refdocs.Sinks()

// TestRegisteredSinks: every sink binary under sinks/ is in registered.
func TestRegisteredSinks(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "github.com/proxysinks/proxysinks/sinks/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var mains, names []string
	for _, p := range strings.Fields(string(out)) {
		mains = append(mains, path.Base(p))
	}
	for _, s := range registered {
		names = append(names, s.Name)
	}
	slices.Sort(mains)
	slices.Sort(names)
	if diff := cmp.Diff(mains, names); diff != "" {
		t.Errorf("registered sinks (-binaries +registered):\n%s", diff)
	}
}

// TestTables: every sink classes, exactly once, every flag of every
// registered sink and every KubeProxyConfiguration field.
func TestTables(t *testing.T) {
	for _, p := range tableProblems(registered) {
		t.Error(p)
	}
}

// TestTablesFindUnclassed: the check fails on a sink that leaves a field
// or another sink's flag unclassed.
func TestTablesFindUnclassed(t *testing.T) {
	broken := iptablessink.Sink("iptables", "")
	broken.Fields = slices.DeleteFunc(slices.Clone(broken.Fields), func(f kpconfig.Field) bool { return f.Name == "ipvs" })
	flags := broken.Flags
	broken.Flags = func() []runtime.Flag {
		return slices.DeleteFunc(flags(), func(f runtime.Flag) bool { return f.Name() == "weight" || f.Name() == "scheduling-method" })
	}
	got := strings.Join(tableProblems([]runtime.Sink{registered[0], broken}), "\n")
	for _, want := range []string{"iptables: field ipvs.scheduler: 0 classes", "iptables: flag --weight: 0 classes",
		"iptables: kube-proxy flag --ipvs-scheduler: not in the table"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems %q; want one saying %q", got, want)
		}
	}
}

// tableProblems checks the tables of sinks against each other, against
// kube-proxy's flags and against the KubeProxyConfiguration type.
func tableProblems(sinks []runtime.Sink) []string {
	var problems []string
	owners := map[string]runtime.Flag{} // the honoured definition of every flag, or kube-proxy's
	for _, s := range sinks {
		for _, f := range s.Table().Flags {
			if _, ok := owners[f.Name()]; f.Class == kpconfig.Honoured || !ok && kubeProxyDefines(f) {
				owners[f.Name()] = f
			}
		}
	}
	leaves := fieldLeaves(reflect.TypeFor[v1alpha1.KubeProxyConfiguration](), "")
	for _, s := range sinks {
		t := s.Table()
		problems = append(problems, flagProblems(s.Name, t, owners)...)
		problems = append(problems, fieldProblems(s.Name, t, leaves)...)
		problems = append(problems, kubeProxyProblems(s.Name, t)...)
	}
	return problems
}

// pendingFlags are kube-proxy flags that changes of their own add to the
// tables (named by what they do); TestTables fails once one is in a table,
// so that it leaves this list.
var pendingFlags = map[string]string{}

// kubeProxyDefines reports whether one of f's names is a kube-proxy flag.
func kubeProxyDefines(f runtime.Flag) bool {
	return runtime.KubeProxyName(f.Flag) != ""
}

// kubeProxyProblems: every flag of kube-proxy v1.37.2 is in the table (one
// of an entry's names), with kube-proxy's precedence against --config.
func kubeProxyProblems(sink string, t runtime.Table) []string {
	var problems []string
	for _, k := range runtime.KubeProxyFlags {
		i := slices.IndexFunc(t.Flags, func(f runtime.Flag) bool { return slices.Contains(f.Flag.Names(), k.Name) })
		_, pending := pendingFlags[k.Name]
		switch {
		case i < 0 && pending:
			continue
		case i < 0:
			problems = append(problems, fmt.Sprintf("%s: kube-proxy flag --%s: not in the table", sink, k.Name))
			continue
		case pending:
			problems = append(problems, fmt.Sprintf("%s: kube-proxy flag --%s: in the table now; take it off pendingFlags", sink, k.Name))
		}
		f := t.Flags[i]
		if applies := f.File == "" || f.OverFile; applies != k.WithConfig {
			problems = append(problems, fmt.Sprintf("%s: kube-proxy flag --%s: applies with --config: %t (File %q, OverFile %t); kube-proxy: %t",
				sink, k.Name, applies, f.File, f.OverFile, k.WithConfig))
		}
	}
	return problems
}

func flagProblems(sink string, t runtime.Table, owners map[string]runtime.Flag) []string {
	var problems []string
	count := map[string]int{}
	for _, f := range t.Flags {
		count[f.Name()]++
		switch f.Class {
		case kpconfig.Honoured, kpconfig.Refused:
		case kpconfig.Ignored:
			if f.Why == "" {
				problems = append(problems, fmt.Sprintf("%s: flag --%s: ignored without a reason", sink, f.Name()))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: flag --%s: no class (%v)", sink, f.Name(), f.Class))
		}
		if o, ok := owners[f.Name()]; ok && (reflect.TypeOf(o.Flag) != reflect.TypeOf(f.Flag) || !slices.Equal(o.Flag.Names(), f.Flag.Names())) {
			problems = append(problems, fmt.Sprintf("%s: flag --%s: %T %v, but its owner's is %T %v", sink, f.Name(), f.Flag, f.Flag.Names(), o.Flag, o.Flag.Names()))
		}
	}
	for name := range owners {
		if count[name] != 1 {
			problems = append(problems, fmt.Sprintf("%s: flag --%s: %d classes, want 1", sink, name, count[name]))
		}
	}
	for name, n := range count {
		if _, ok := owners[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s: flag --%s (%d entries): no sink honours it", sink, name, n))
		}
	}
	slices.Sort(problems)
	return problems
}

func fieldProblems(sink string, t runtime.Table, leaves []string) []string {
	var problems []string
	root := reflect.ValueOf(v1alpha1.KubeProxyConfiguration{})
	honoured := map[string]bool{}
	for _, f := range t.Flags {
		if f.Class == kpconfig.Honoured {
			for _, n := range f.Flag.Names() {
				honoured[n] = true
			}
		}
	}
	for _, f := range t.Fields {
		for _, p := range f.Covers() {
			if _, ok := kpconfig.Lookup(root, p); !ok {
				problems = append(problems, fmt.Sprintf("%s: field %s: not a field of a KubeProxyConfiguration", sink, p))
			}
		}
		switch {
		case f.Class == kpconfig.Honoured && f.Flag != "" && !honoured[f.Flag]:
			problems = append(problems, fmt.Sprintf("%s: field %s: sets --%s, which the sink does not honour", sink, f.Name, f.Flag))
		case f.Class == kpconfig.Honoured && f.Flag == "" && f.Value == nil && f.Name != "apiVersion" && f.Name != "kind":
			problems = append(problems, fmt.Sprintf("%s: field %s: honoured, but neither sets a flag nor is checked", sink, f.Name))
		case (f.Class == kpconfig.Ignored || f.Class == kpconfig.Refused) && f.Why == "":
			problems = append(problems, fmt.Sprintf("%s: field %s: %s without a reason", sink, f.Name, f.Class))
		case f.Class != kpconfig.Honoured && f.Class != kpconfig.Ignored && f.Class != kpconfig.Refused:
			problems = append(problems, fmt.Sprintf("%s: field %s: no class", sink, f.Name))
		}
	}
	for _, leaf := range leaves {
		n := 0
		for _, f := range t.Fields {
			for _, p := range f.Covers() {
				if leaf == p || strings.HasPrefix(leaf, p+".") {
					n++
				}
			}
		}
		if n != 1 {
			problems = append(problems, fmt.Sprintf("%s: field %s: %d classes, want 1", sink, leaf, n))
		}
	}
	return problems
}

// fieldLeaves returns the paths of the fields of struct type typ (JSON
// names joined by dots, under prefix): a struct's fields, inlined ones
// included, down to values that are not structs or that encode themselves
// (durations, quantities).
func fieldLeaves(typ reflect.Type, prefix string) []string {
	var out []string
	for i := range typ.NumField() {
		sf := typ.Field(i)
		name := kpconfig.JSONName(sf)
		if name == "-" || !sf.IsExported() {
			continue
		}
		p := prefix
		if name != "" {
			p = strings.TrimPrefix(prefix+"."+name, ".")
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !encodesItself(ft) {
			out = append(out, fieldLeaves(ft, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func encodesItself(t reflect.Type) bool {
	m := reflect.TypeFor[json.Marshaler]()
	return t.Implements(m) || reflect.PointerTo(t).Implements(m)
}

// TestFieldLeaves: the walk sees the fields a KubeProxyConfiguration has,
// inlined and nested ones.
func TestFieldLeaves(t *testing.T) {
	leaves := fieldLeaves(reflect.TypeFor[v1alpha1.KubeProxyConfiguration](), "")
	for _, want := range []string{"apiVersion", "kind", "mode", "ipvs.scheduler", "conntrack.tcpEstablishedTimeout",
		"clientConnection.qps", "logging.flushFrequency", "detectLocal.bridgeInterface", "featureGates"} {
		if !slices.Contains(leaves, want) {
			t.Errorf("leaves %q lack %s", leaves, want)
		}
	}
}
