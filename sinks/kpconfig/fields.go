package kpconfig

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// Class is how a sink treats a kube-proxy flag or configuration field.
type Class int

// The classes. Every flag and field a sink knows has exactly one.
const (
	// Honoured: the sink does what kube-proxy does with it (a field sets
	// its flag, or is checked).
	Honoured Class = iota + 1
	// Ignored: accepted, and logged once at start (it changes no traffic;
	// kube-proxy too accepts the settings of its other modes).
	Ignored
	// Refused: an error naming it (ignoring it would change traffic).
	Refused
)

// String returns the class's name.
func (c Class) String() string {
	switch c {
	case Honoured:
		return "honoured"
	case Ignored:
		return "ignored"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Field is how a sink treats a KubeProxyConfiguration field, or a group
// of them.
type Field struct {
	// Name is the field's path in the file, e.g. "ipvs.scheduler"; a
	// struct's path (e.g. "conntrack") covers every field in it. Messages
	// name it.
	Name string
	// Paths, when set, are the paths the entry covers instead of Name (a
	// group named once in messages).
	Paths []string
	Class Class
	// Flag is the flag an honoured field sets (none: the field is only
	// checked, by Value).
	Flag string
	// Why is, for an ignored or refused field, the reason the warning or
	// the error gives.
	Why string
	// Value, when set, turns an honoured field's value into the flag's in
	// command-line syntax ("" sets nothing), or refuses it: the error says
	// why, after the field's name. Without it the value is the field's
	// own: lists joined by commas, durations in Go syntax; unset, zero or
	// false values set nothing.
	Value func(v any) (string, error)
	// Accepts, for a field whose Value refuses some values, says which it
	// takes (the operator docs).
	Accepts string
}

// Covers returns the paths the entry classes.
func (f Field) Covers() []string {
	if len(f.Paths) > 0 {
		return f.Paths
	}
	return []string{f.Name}
}

// NoFlag refuses a field of another mode that maps onto a flag the sink
// does not have.
func NoFlag(name, flag string) Field {
	return Field{Name: name, Class: Refused, Why: fmt.Sprintf("has no meaning for this sink (no --%s)", flag)}
}

// NFTables ignores the nftables mode's fields, as kube-proxy does in its
// other modes (its own --write-config-to output sets them).
var NFTables = Field{Name: "nftables", Class: Ignored, Why: "another proxy mode's settings (the nftables sink takes them)"}

// MasqueradeSection returns the section of the file whose masqueradeBit and
// masqueradeAll a sink of mode honours: kube-proxy's nftables mode takes
// nftables.masqueradeBit and nftables.masqueradeAll, every other mode the
// iptables ones (the sink of that mode classes the other section's).
func MasqueradeSection(mode string) string {
	if mode == "nftables" {
		return "nftables"
	}
	return "iptables"
}

// Table returns the fields of a sink whose mode is mode: those every sink
// shares (the process, the node, the HTTP addresses, masquerading, logging,
// what only tunes kube-proxy's own process or other platforms) around the
// sink's own (its mode's fields, and its classes of the other modes').
func Table(mode string, sink []Field) []Field {
	t := sharedHead(mode)
	t = append(t, sink...)
	return append(t, sharedTail...)
}

func sharedHead(mode string) []Field {
	return []Field{
		// Decode checks the document's type.
		{Name: "apiVersion", Class: Honoured},
		{Name: "kind", Class: Honoured},
		{Name: "mode", Class: Honoured, Value: func(v any) (string, error) {
			return "", CheckMode(string(v.(v1alpha1.ProxyMode)), mode)
		}, Accepts: "the sink's mode (empty is kube-proxy's default, iptables)"},
		{Name: "hostnameOverride", Class: Honoured, Flag: "hostname-override"},
		{Name: "healthzBindAddress", Class: Honoured, Flag: "healthz-bind-address"},
		{Name: "metricsBindAddress", Class: Honoured, Flag: "metrics-bind-address"},
		{Name: "clientConnection.kubeconfig", Class: Honoured, Flag: "kubeconfig"},
		{Name: "nodePortAddresses", Class: Honoured, Flag: "nodeport-addresses"},
		{Name: "bindAddress", Class: Honoured, Flag: "bind-address"},
		{Name: "clusterCIDR", Class: Honoured, Flag: "cluster-cidr"},
		{Name: "detectLocalMode", Class: Honoured, Flag: "detect-local-mode"},
		{Name: "detectLocal.bridgeInterface", Class: Honoured, Flag: "pod-bridge-interface"},
		{Name: "detectLocal.interfaceNamePrefix", Class: Honoured, Flag: "pod-interface-name-prefix"},
		{Name: MasqueradeSection(mode) + ".masqueradeBit", Class: Honoured, Flag: "iptables-masquerade-bit"},
		{Name: MasqueradeSection(mode) + ".masqueradeAll", Class: Honoured, Flag: "masquerade-all"},
	}
}

var sharedTail = []Field{
	{Name: "logging.format", Class: Honoured, Flag: "log-format", Value: func(v any) (string, error) {
		switch f := v.(string); f {
		case "", "text":
			return "", nil
		case "json":
			return "json", nil
		default:
			return "", fmt.Errorf("%q is not supported (text or json)", f)
		}
	}, Accepts: "text, json"},
	{Name: "logging.verbosity", Class: Honoured, Flag: "log-level", Value: func(v any) (string, error) {
		switch l := reflect.ValueOf(v).Uint(); { // logsapi.VerbosityLevel
		case l >= 4:
			return "debug", nil
		case l > 0:
			return "info", nil
		}
		return "", nil
	}},
	{Name: "logging.flushFrequency", Class: Ignored, Why: "the sinks do not buffer their logs"},
	{Name: "logging.vmodule", Class: Ignored, Why: "no per-file log levels"},
	{Name: "logging.options", Class: Ignored, Why: "the log formats have no options"},
	// What tunes kube-proxy's own process, other components or other
	// platforms.
	// kube-proxy's conntrack settings, applied at start by every sink.
	{Name: "conntrack.maxPerCore", Class: Honoured, Flag: "conntrack-max-per-core"},
	{Name: "conntrack.min", Class: Honoured, Flag: "conntrack-min"},
	{Name: "conntrack.tcpEstablishedTimeout", Class: Honoured, Flag: "conntrack-tcp-timeout-established", Value: durationPointer},
	{Name: "conntrack.tcpCloseWaitTimeout", Class: Honoured, Flag: "conntrack-tcp-timeout-close-wait", Value: durationPointer},
	{Name: "conntrack.tcpBeLiberal", Class: Honoured, Flag: "conntrack-tcp-be-liberal"},
	{Name: "conntrack.udpTimeout", Class: Honoured, Flag: "conntrack-udp-timeout"},
	{Name: "conntrack.udpStreamTimeout", Class: Honoured, Flag: "conntrack-udp-timeout-stream"},
	{Name: "clientConnection.qps/burst/contentType", Class: Ignored, Why: "client-go defaults are used",
		Paths: []string{"clientConnection.qps", "clientConnection.burst", "clientConnection.contentType", "clientConnection.acceptContentTypes"}},
	{Name: "oomScoreAdj", Class: Honoured, Flag: "oom-score-adj"},
	// Checked by the runtime against Gates.
	{Name: "featureGates", Class: Honoured, Flag: "feature-gates"},
	{Name: "bindAddressHardFail", Class: Ignored, Why: "a bind failure is always fatal"},
	{Name: "enableProfiling", Class: Ignored, Why: "no profiling endpoint"},
	{Name: "configSyncPeriod", Class: Ignored, Why: "informers do not resync"},
	{Name: "portRange", Class: Ignored, Why: "removed from kube-proxy"},
	{Name: "showHiddenMetricsForVersion", Class: Ignored, Why: "no hidden metrics"},
	{Name: "winkernel", Class: Ignored, Why: "Windows only"},
	{Name: "windowsRunAsService", Class: Ignored, Why: "Windows only"},
}

// durationPointer is the flag value of an optional duration: set, even to
// zero (which leaves the kernel's value, where kube-proxy's default
// would not).
func durationPointer(v any) (string, error) {
	if d := v.(*metav1.Duration); d != nil {
		return d.Duration.String(), nil
	}
	return "", nil
}

// Settings maps cfg onto a sink's flags through its table (fields, see
// Table). has reports whether the sink honours a flag. It returns the
// settings of the honoured fields the file sets, warnings for the ignored
// fields it sets, and an error naming every refused field it sets.
func Settings(cfg *v1alpha1.KubeProxyConfiguration, fields []Field, has func(flag string) bool) ([]Setting, []string, error) {
	m := mapper{has: has}
	root := reflect.ValueOf(cfg).Elem()
	for _, f := range fields {
		m.field(root, f)
	}
	return m.settings, m.warnings, errors.Join(m.errs...)
}

type mapper struct {
	has      func(string) bool
	settings []Setting
	warnings []string
	errs     []error
}

func (m *mapper) fail(field string, why error) {
	m.errs = append(m.errs, fmt.Errorf("--config: %s %w", field, why))
}

// field applies one entry of the table.
func (m *mapper) field(root reflect.Value, f Field) {
	var vals []reflect.Value
	set := false
	for _, p := range f.Covers() {
		v, ok := Lookup(root, p)
		if !ok {
			m.fail(f.Name, fmt.Errorf("is classed as %s, but %s is not a field of a KubeProxyConfiguration", f.Class, p))
			return
		}
		vals = append(vals, v)
		set = set || isSet(v)
	}
	switch f.Class {
	case Ignored:
		if set {
			m.warnings = append(m.warnings, fmt.Sprintf("--config: %s ignored: %s", f.Name, f.Why))
		}
	case Refused:
		if set {
			m.fail(f.Name, errors.New(f.Why))
		}
	case Honoured:
		for _, v := range vals {
			m.honour(f, v)
		}
	default:
		m.fail(f.Name, errors.New("has no class for this sink"))
	}
}

// honour sets the flag of an honoured field from its value v.
func (m *mapper) honour(f Field, v reflect.Value) {
	val := flagValue(v)
	if f.Value != nil {
		var err error
		if val, err = f.Value(v.Interface()); err != nil {
			m.fail(f.Name, err)
			return
		}
	}
	if val == "" || f.Flag == "" {
		return
	}
	if !m.has(f.Flag) {
		m.fail(f.Name, fmt.Errorf("has no meaning for this sink (no --%s)", f.Flag))
		return
	}
	m.settings = append(m.settings, Setting{Field: f.Name, Flag: f.Flag, Value: val})
}

// isSet reports whether a field has a value: not zero, and for a list or a
// map not empty.
func isSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() > 0
	}
	return !v.IsZero()
}

// flagValue returns a field's value in command-line syntax, "" when unset.
func flagValue(v reflect.Value) string {
	if !isSet(v) {
		return ""
	}
	switch x := v.Interface().(type) {
	case metav1.Duration:
		return x.Duration.String()
	case []string:
		return strings.Join(x, ",")
	case map[string]bool:
		return FormatGates(x)
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return fmt.Sprint(v.Interface())
}

// Lookup returns the field of a KubeProxyConfiguration (root, a struct
// value) at path, its JSON names joined by dots; false when there is none.
func Lookup(root reflect.Value, path string) (reflect.Value, bool) {
	v := root
	for _, name := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v = reflect.Zero(v.Type().Elem())
			} else {
				v = v.Elem()
			}
		}
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		f, ok := child(v, name)
		if !ok {
			return reflect.Value{}, false
		}
		v = f
	}
	return v, true
}

// child returns the field of struct v whose JSON name is name, looking
// into inlined embedded structs.
func child(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		switch json := JSONName(sf); {
		case json == name && json != "" && json != "-":
			return v.Field(i), true
		case json == "":
			if f, ok := child(v.Field(i), name); ok {
				return f, true
			}
		}
	}
	return reflect.Value{}, false
}

// JSONName returns the JSON name of a struct field ("" for an inlined
// embedded struct, "-" for one not encoded).
func JSONName(sf reflect.StructField) string {
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	if name == "" && !sf.Anonymous {
		return sf.Name
	}
	return name
}
