// Package kpconfig reads kube-proxy's configuration file (a
// KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1, as kept in the
// kube-proxy ConfigMap) and turns it into the sink flags it maps onto, so an
// operator replacing kube-proxy keeps the settings they have. The file is
// decoded with the upstream types (k8s.io/kube-proxy); flags given on the
// command line or in the environment win over the file, as in kube-proxy.
//
// Every field is classed, for each sink, in a table of Fields (Table: the
// fields every sink shares, around the sink's own): honoured (it sets a
// flag, or is checked), ignored (a warning at start: it only tunes
// kube-proxy's own process, conntrack sysctls, client QPS, OOM score,
// profiling, or another mode), or refused (an error naming it: ignoring it
// would change what traffic does, such as the nftables settings). The file
// cannot choose the sink: a mode other than the binary's is an error.
package kpconfig

import (
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// Setting is one flag value taken from the file.
type Setting struct {
	// Field is the field's path in the file, e.g. "ipvs.scheduler".
	Field string
	// Flag is the sink flag it sets, e.g. "scheduling-method".
	Flag string
	// Value is the flag's value in command-line syntax.
	Value string
}

// maxSize bounds the file: a KubeProxyConfiguration is a few kilobytes.
const maxSize = 1 << 20

// Load reads and decodes a KubeProxyConfiguration. Unknown or duplicate
// fields are reported as warnings (kube-proxy falls back to lenient
// decoding for them too); anything else that does not decode is an error
// naming the file.
func Load(path string) (cfg *v1alpha1.KubeProxyConfiguration, warnings []string, err error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is then
	// refused as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("--config %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if len(data) > maxSize {
		return nil, nil, fmt.Errorf("--config %s: larger than %d bytes", path, maxSize)
	}
	return Decode(data, path)
}

// Decode decodes a KubeProxyConfiguration from YAML or JSON; name is used
// in messages.
func Decode(data []byte, name string) (*v1alpha1.KubeProxyConfiguration, []string, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	strict := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	obj, gvk, err := strict.Decode(data, nil, nil)
	var warnings []string
	if err != nil && runtime.IsStrictDecodingError(err) {
		for _, e := range err.(interface{ Errors() []error }).Errors() {
			warnings = append(warnings, fmt.Sprintf("%s: %v (ignored)", name, e))
		}
		obj, gvk, err = serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(data, nil, nil)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--config %s: %w (want apiVersion %s, kind KubeProxyConfiguration)", name, err, v1alpha1.SchemeGroupVersion)
	}
	cfg, ok := obj.(*v1alpha1.KubeProxyConfiguration)
	if !ok {
		return nil, nil, fmt.Errorf("--config %s: a %s, want a KubeProxyConfiguration", name, gvk)
	}
	return cfg, warnings, nil
}

// Apply loads the file named by the "config" flag, if given, and sets every
// flag its fields map onto (fields: the sink's table, see Table) that was
// not given on the command line or in the environment. Flags named in
// unsupported are ones the sink does not honour: a field that maps onto one
// is an error. It returns the warnings to log. Call it before reading the
// flags' values.
func Apply(c *cli.Context, fields []Field, unsupported []string) ([]string, error) {
	path := c.String("config")
	if path == "" {
		return nil, nil
	}
	cfg, warnings, err := Load(path)
	if err != nil {
		return nil, err
	}
	// canonical returns the flag's first name, which the sinks read (an
	// alias set after parsing does not reach it).
	canonical := func(flag string) string {
		for _, f := range c.App.Flags {
			if slices.Contains(f.Names(), flag) && !slices.Contains(unsupported, f.Names()[0]) {
				return f.Names()[0]
			}
		}
		return ""
	}
	settings, more, err := Settings(cfg, fields, func(flag string) bool { return canonical(flag) != "" })
	warnings = append(warnings, more...)
	if err != nil {
		return warnings, err
	}
	for _, s := range settings {
		name := canonical(s.Flag)
		if c.IsSet(name) {
			continue
		}
		if err := c.Set(name, s.Value); err != nil {
			return warnings, fmt.Errorf("--config: %s: %q for --%s: %w", s.Field, s.Value, s.Flag, err)
		}
	}
	return warnings, nil
}
