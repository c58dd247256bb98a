// Package kpconfig reads kube-proxy's configuration file (a
// KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1, as kept in the
// kube-proxy ConfigMap) and turns it into the sink flags it maps onto, so an
// operator replacing kube-proxy keeps the settings they have. The file is
// decoded with the upstream types (k8s.io/kube-proxy); flags given on the
// command line or in the environment win over the file, as in kube-proxy.
//
// The file cannot choose the sink: a mode other than the binary's is an
// error. A field the sink cannot honour is an error when ignoring it would
// change what traffic does (detectLocalMode other than ClusterCIDR, the
// nftables settings), and a warning when it only tunes kube-proxy's own
// process (conntrack sysctls, client QPS, OOM score, profiling).
package kpconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// Settings maps cfg onto the flags of a sink whose mode is mode ("ipvs" or
// "iptables"). has reports whether the sink has a flag. It returns the
// settings for every field the file sets, warnings for fields the sink
// ignores, and an error naming every field the sink cannot honour.
func Settings(cfg *v1alpha1.KubeProxyConfiguration, mode string, has func(flag string) bool) ([]Setting, []string, error) {
	m := mapper{has: has}
	if cfg.Mode != "" && string(cfg.Mode) != mode {
		m.fail("mode", fmt.Sprintf("is %q, but this is the %s sink (the binary chooses the mode)", cfg.Mode, mode))
	}
	m.str("hostnameOverride", "hostname-override", cfg.HostnameOverride)
	m.str("healthzBindAddress", "healthz-bind-address", cfg.HealthzBindAddress)
	m.str("metricsBindAddress", "metrics-bind-address", cfg.MetricsBindAddress)
	m.str("clientConnection.kubeconfig", "kubeconfig", cfg.ClientConnection.Kubeconfig)
	m.list("nodePortAddresses", "nodeport-addresses", cfg.NodePortAddresses)
	m.str("clusterCIDR", "cluster-cidr", cfg.ClusterCIDR)
	switch cfg.DetectLocalMode {
	case "", "ClusterCIDR":
	default:
		m.fail("detectLocalMode", fmt.Sprintf("%q is not supported (only ClusterCIDR, from --cluster-cidr)", cfg.DetectLocalMode))
	}
	if cfg.IPTables.MasqueradeBit != nil {
		m.str("iptables.masqueradeBit", "iptables-masquerade-bit", strconv.Itoa(int(*cfg.IPTables.MasqueradeBit)))
	}
	m.boolean("iptables.masqueradeAll", "masquerade-all", cfg.IPTables.MasqueradeAll)
	if cfg.IPTables.LocalhostNodePorts != nil {
		m.str("iptables.localhostNodePorts", "iptables-localhost-nodeports", strconv.FormatBool(*cfg.IPTables.LocalhostNodePorts))
	}
	switch mode {
	case "ipvs":
		m.duration("ipvs.syncPeriod", "sync-period", cfg.IPVS.SyncPeriod.Duration)
		m.duration("ipvs.minSyncPeriod", "min-sync-period", cfg.IPVS.MinSyncPeriod.Duration)
		m.ignored("iptables.syncPeriod", cfg.IPTables.SyncPeriod.Duration != 0, "the IPVS sinks take ipvs.syncPeriod")
		m.ignored("iptables.minSyncPeriod", cfg.IPTables.MinSyncPeriod.Duration != 0, "the IPVS sinks take ipvs.minSyncPeriod")
	default:
		m.duration("iptables.syncPeriod", "sync-period", cfg.IPTables.SyncPeriod.Duration)
		m.duration("iptables.minSyncPeriod", "min-sync-period", cfg.IPTables.MinSyncPeriod.Duration)
	}
	m.str("ipvs.scheduler", "ipvs-scheduler", cfg.IPVS.Scheduler)
	m.list("ipvs.excludeCIDRs", "ipvs-exclude-cidrs", cfg.IPVS.ExcludeCIDRs)
	m.boolean("ipvs.strictARP", "ipvs-strict-arp", cfg.IPVS.StrictARP)
	m.duration("ipvs.tcpTimeout", "ipvs-tcp-timeout", cfg.IPVS.TCPTimeout.Duration)
	m.duration("ipvs.tcpFinTimeout", "ipvs-tcpfin-timeout", cfg.IPVS.TCPFinTimeout.Duration)
	m.duration("ipvs.udpTimeout", "ipvs-udp-timeout", cfg.IPVS.UDPTimeout.Duration)
	nft := cfg.NFTables
	if nft.MasqueradeBit != nil || nft.MasqueradeAll || nft.SyncPeriod.Duration != 0 || nft.MinSyncPeriod.Duration != 0 {
		m.fail("nftables", "no sink programs nftables; set the iptables.* or ipvs.* fields instead")
	}
	switch cfg.Logging.Format {
	case "", "text":
	case "json":
		m.str("logging.format", "log-format", "json")
	default:
		m.fail("logging.format", fmt.Sprintf("%q is not supported (text or json)", cfg.Logging.Format))
	}
	if v := cfg.Logging.Verbosity; v > 0 {
		level := "info"
		if v >= 4 {
			level = "debug"
		}
		m.str("logging.verbosity", "log-level", level)
	}
	// What tunes kube-proxy's own process or other components.
	ct := cfg.Conntrack
	m.ignored("conntrack", ct.MaxPerCore != nil || ct.Min != nil || ct.TCPEstablishedTimeout != nil ||
		ct.TCPCloseWaitTimeout != nil || ct.TCPBeLiberal || ct.UDPTimeout.Duration != 0 || ct.UDPStreamTimeout.Duration != 0,
		"the sinks do not set conntrack sysctls; set them on the node")
	m.ignored("clientConnection.qps/burst/contentType", cfg.ClientConnection.QPS != 0 || cfg.ClientConnection.Burst != 0 ||
		cfg.ClientConnection.ContentType != "" || cfg.ClientConnection.AcceptContentTypes != "", "client-go defaults are used")
	m.ignored("oomScoreAdj", cfg.OOMScoreAdj != nil, "set it in the DaemonSet")
	m.ignored("featureGates", len(cfg.FeatureGates) > 0, "the sinks have no feature gates")
	m.ignored("bindAddress", cfg.BindAddress != "", "deprecated in kube-proxy")
	m.ignored("bindAddressHardFail", cfg.BindAddressHardFail, "a bind failure is always fatal")
	m.ignored("enableProfiling", cfg.EnableProfiling, "no profiling endpoint")
	m.ignored("configSyncPeriod", cfg.ConfigSyncPeriod.Duration != 0, "informers do not resync")
	m.ignored("portRange", cfg.PortRange != "", "removed from kube-proxy")
	m.ignored("showHiddenMetricsForVersion", cfg.ShowHiddenMetricsForVersion != "", "no hidden metrics")
	return m.settings, m.warnings, errors.Join(m.errs...)
}

type mapper struct {
	has      func(string) bool
	settings []Setting
	warnings []string
	errs     []error
}

func (m *mapper) fail(field, why string) {
	m.errs = append(m.errs, fmt.Errorf("--config: %s %s", field, why))
}

func (m *mapper) ignored(field string, set bool, why string) {
	if set {
		m.warnings = append(m.warnings, fmt.Sprintf("--config: %s ignored: %s", field, why))
	}
}

func (m *mapper) str(field, flag, v string) {
	if v == "" {
		return
	}
	if !m.has(flag) {
		m.fail(field, fmt.Sprintf("has no meaning for this sink (no --%s)", flag))
		return
	}
	m.settings = append(m.settings, Setting{Field: field, Flag: flag, Value: v})
}

func (m *mapper) list(field, flag string, v []string) { m.str(field, flag, strings.Join(v, ",")) }

func (m *mapper) boolean(field, flag string, v bool) {
	if v {
		m.str(field, flag, "true")
	}
}

func (m *mapper) duration(field, flag string, d time.Duration) {
	if d != 0 {
		m.str(field, flag, d.String())
	}
}

// Apply loads the file named by the "config" flag, if given, and sets every
// flag it maps onto that was not given on the command line or in the
// environment. Flags named in unsupported are ones the sink refuses: a
// field that maps onto one is an error. It returns the warnings to log.
// Call it before reading the flags' values.
func Apply(c *cli.Context, mode string, unsupported []string) ([]string, error) {
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
	settings, more, err := Settings(cfg, mode, func(flag string) bool { return canonical(flag) != "" })
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
