package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/kernel"
)

// conntrackFlags are kube-proxy's --conntrack-* flags, with its defaults
// (conntrack.Defaults); every sink honours them.
func conntrackFlags() []cli.Flag {
	d := conntrack.Defaults()
	return []cli.Flag{
		&cli.IntFlag{Name: "conntrack-max-per-core", Value: d.MaxPerCore, EnvVars: EnvVars("conntrack-max-per-core"), Usage: "conntrack entries per CPU: raises nf_conntrack_max to this times the CPUs, at least --conntrack-min (0: leave the limit and ignore --conntrack-min)"},
		&cli.IntFlag{Name: "conntrack-min", Value: d.Min, EnvVars: EnvVars("conntrack-min"), Usage: "conntrack entries to allow at least, whatever --conntrack-max-per-core"},
		&cli.DurationFlag{Name: "conntrack-tcp-timeout-established", Value: d.TCPEstablishedTimeout, EnvVars: EnvVars("conntrack-tcp-timeout-established"), Usage: "idle timeout of established TCP connections (0: leave it)"},
		&cli.DurationFlag{Name: "conntrack-tcp-timeout-close-wait", Value: d.TCPCloseWaitTimeout, EnvVars: EnvVars("conntrack-tcp-timeout-close-wait"), Usage: "timeout of TCP connections in CLOSE_WAIT (0: leave it)"},
		&cli.BoolFlag{Name: "conntrack-tcp-be-liberal", EnvVars: EnvVars("conntrack-tcp-be-liberal"), Usage: "set nf_conntrack_tcp_be_liberal to 1 (out-of-window TCP packets are tracked, not INVALID)"},
		&cli.DurationFlag{Name: "conntrack-udp-timeout", EnvVars: EnvVars("conntrack-udp-timeout"), Usage: "idle timeout of UDP flows not answered (0: leave it)"},
		&cli.DurationFlag{Name: "conntrack-udp-timeout-stream", EnvVars: EnvVars("conntrack-udp-timeout-stream"), Usage: "idle timeout of answered UDP flows (0: leave it)"},
	}
}

// conntrackSettings reads the --conntrack-* flags; a negative value is an
// error naming its flag.
func conntrackSettings(c *cli.Context) (conntrack.Settings, error) {
	s := conntrack.Settings{
		MaxPerCore: c.Int("conntrack-max-per-core"), Min: c.Int("conntrack-min"),
		TCPEstablishedTimeout: c.Duration("conntrack-tcp-timeout-established"), TCPCloseWaitTimeout: c.Duration("conntrack-tcp-timeout-close-wait"),
		TCPBeLiberal: c.Bool("conntrack-tcp-be-liberal"),
		UDPTimeout:   c.Duration("conntrack-udp-timeout"), UDPStreamTimeout: c.Duration("conntrack-udp-timeout-stream"),
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"conntrack-max-per-core", s.MaxPerCore}, {"conntrack-min", s.Min}} {
		if n.v < 0 {
			return s, fmt.Errorf("--%s: %d is negative", n.flag, n.v)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"conntrack-tcp-timeout-established", s.TCPEstablishedTimeout}, {"conntrack-tcp-timeout-close-wait", s.TCPCloseWaitTimeout},
		{"conntrack-udp-timeout", s.UDPTimeout}, {"conntrack-udp-timeout-stream", s.UDPStreamTimeout}} {
		if d.v < 0 {
			return s, fmt.Errorf("--%s: %s is negative", d.flag, d.v)
		}
	}
	return s, nil
}

// applyConntrack applies the conntrack settings to the node at start, as
// kube-proxy does; nf_conntrack is loaded first when its sysctls are
// missing.
func applyConntrack(s conntrack.Settings, log *slog.Logger) error {
	a, err := conntrack.Apply(s, conntrack.Node{})
	if errors.Is(err, fs.ErrNotExist) {
		if lerr := (kernel.Modules{}).Ensure([]string{kernel.ModuleNFConntrack}); lerr != nil {
			return errors.Join(err, lerr)
		}
		a, err = conntrack.Apply(s, conntrack.Node{})
	}
	if err != nil {
		return err
	}
	for _, w := range a.Written {
		log.Info("conntrack setting applied", "sysctl", w.Name, "value", w.Value)
	}
	if a.MaxSkipped != "" {
		log.Warn("conntrack limit not raised", "why", a.MaxSkipped)
	}
	return nil
}
