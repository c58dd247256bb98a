package refdocs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// ConfigPage renders docs/reference/config.md: every KubeProxyConfiguration
// field (kpconfig's tables) and every feature gate the sinks check
// (kpconfig.Gates), with what each mode's sinks do with it.
func ConfigPage(sinks []runtime.Sink) (string, error) {
	ms, err := modes(sinks)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header("KubeProxyConfiguration"))
	b.WriteString("`--config` takes kube-proxy's configuration file (`kind: KubeProxyConfiguration`, `apiVersion: kubeproxy.config.k8s.io/v1alpha1`). As in kube-proxy, the file replaces the flags that map onto it (see [flags.md](flags.md)).\n")
	b.WriteString("\n## Fields\n\nEvery field of kubeproxy.config.k8s.io/v1alpha1 (a group covers the fields under it). Honoured fields set the sink's flag named; ignored ones are logged once at start (a warning naming the field and why); refused ones stop the sink with exit status 2 and a message naming the field.\n\n")
	b.WriteString(row(append([]string{"field"}, heads(ms)...)...))
	b.WriteString(row(slices.Repeat([]string{"---"}, len(ms)+1)...))
	var names []string
	for _, m := range ms {
		for _, f := range m.Table.Fields {
			if !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
	}
	for _, name := range names {
		cells := []string{"`" + name + "`"}
		for _, m := range ms {
			cells = append(cells, fieldCellOf(m.Table.Fields, name))
		}
		b.WriteString(row(cells...))
	}
	b.WriteString("\n## Feature gates\n\n`featureGates` in the file and `--feature-gates` are checked against kube-proxy v1.37.2's gates that change what it programs on Linux, or that it locks. Any other gate is accepted and logged once.\n\n")
	b.WriteString(row(append([]string{"gate", "in kube-proxy"}, heads(ms)...)...))
	b.WriteString(row(slices.Repeat([]string{"---"}, len(ms)+2)...))
	for _, g := range kpconfig.Gates {
		cells := []string{"`" + g.Name + "`", g.Does}
		for _, m := range ms {
			cells = append(cells, gateCell(m.Sink.Mode, g))
		}
		b.WriteString(row(cells...))
	}
	return b.String(), nil
}

// fieldCellOf says what a table does with the field or group name: its
// entry's class, the class of the group that covers it, or, for a group
// the table classes field by field, that.
func fieldCellOf(fields []kpconfig.Field, name string) string {
	if i := slices.IndexFunc(fields, func(f kpconfig.Field) bool { return f.Name == name }); i >= 0 {
		return fieldCell(fields[i])
	}
	for _, f := range fields {
		for _, p := range f.Covers() {
			if p == name || strings.HasPrefix(name, p+".") {
				return fieldCell(f) + " (all of `" + f.Name + "`)"
			}
		}
	}
	return "field by field: the `" + name + ".*` rows"
}

// gateCell says what a sink of mode does with the gate set to true, and to
// false (kpconfig.CheckGates).
func gateCell(mode string, g kpconfig.Gate) string {
	var parts []string
	for _, v := range []bool{true, false} {
		w, err := kpconfig.CheckGates(mode, map[string]bool{g.Name: v})
		switch {
		case err != nil:
			parts = append(parts, fmt.Sprintf("%t: refused (%s)", v, g.Why))
		case len(w) > 0:
			parts = append(parts, fmt.Sprintf("%t: ignored", v))
		default:
			parts = append(parts, fmt.Sprintf("%t: honoured", v))
		}
	}
	return strings.Join(parts, "; ")
}

// fieldCell says what a sink does with a field.
func fieldCell(f kpconfig.Field) string {
	switch {
	case f.Class == kpconfig.Honoured && f.Flag != "" && f.Accepts != "":
		return "honoured: `--" + f.Flag + "`; takes " + f.Accepts + ", refuses others"
	case f.Class == kpconfig.Honoured && f.Flag != "":
		return "honoured: `--" + f.Flag + "`"
	case f.Class == kpconfig.Honoured && f.Accepts != "":
		return "honoured: takes " + f.Accepts + ", refuses others"
	case f.Class == kpconfig.Honoured:
		return "honoured"
	}
	return fmt.Sprintf("%s: %s", f.Class, f.Why)
}
