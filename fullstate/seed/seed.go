// Package seed is the full-state controller's seed surface (seeds
// 000 and 001): the seed's names as thin entry points over the real API of
// fullstate, dataplane/rules and client, for code written against the
// seed. The sinks do not use it: they deliver snapshots to
// fullstate.Controller.Snapshot and take their flags from the sink runtime.
package seed

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/controller"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// Controller is the seed's Controller: the full-state controller, with
// the seed's snapshot entry point (Callback) and its /proxyMode server.
type Controller struct {
	*fullstate.Controller
	// ProxyModeAddress is where ServeProxyMode and SetUpHttpListen listen.
	ProxyModeAddress string
	// Handler is what they serve: the sink runtime's handler of the
	// metrics address (/proxyMode, /metrics, /healthz).
	Handler http.Handler
	log     *slog.Logger
}

// NewController returns the seed's Controller over a new
// fullstate.Controller (fullstate.NewController).
func NewController(cfg render.Config, applier *dataplane.Applier, reader controller.Reader, log *slog.Logger) *Controller {
	return Wrap(fullstate.NewController(cfg, applier, reader, log), log)
}

// Wrap returns the seed's Controller over c; log (nil: slog.Default)
// takes the errors of SetUpHttpListen's server.
func Wrap(c *fullstate.Controller, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	return &Controller{Controller: c, log: log}
}

// Callback consumes one snapshot (the channel closes at its end), renders
// every service, and writes the differences to the kernel
// (fullstate.Controller.Sync). The channel is drained whatever happens.
func (c *Controller) Callback(ch <-chan *client.ServiceEndpoints) {
	defer func() {
		for range ch {
		}
	}()
	c.Sync(func(yield func(*client.ServiceEndpoints) bool) {
		for se := range ch {
			if !yield(se) {
				return
			}
		}
	})
}

// Manager is the seed's IPVS Manager: fullstate.Manager with the seed's
// names for recording objects.
type Manager struct{ *fullstate.Manager }

// Manager returns the controller's IPVS manager under the seed's names.
func (c *Controller) Manager() Manager { return Manager{c.Controller.Manager()} }

// ApplyServer records a virtual server (fullstate.Manager.Server).
func (m Manager) ApplyServer(vs render.VirtualServer, o render.ServerOptions) { m.Server(vs, o) }

// AddDestination records a destination of a virtual server
// (fullstate.Manager.Destination).
func (m Manager) AddDestination(d render.Destination, o render.DestOptions) { m.Destination(d, o) }

// BindServerToInterface records that a virtual server's address is bound
// on the dummy link (fullstate.Manager.Bind).
func (m Manager) BindServerToInterface(vs render.VirtualServer) { m.Bind(vs.Addr) }

// ServiceType is the seed's service type: client.ServiceType with a
// String method.
type ServiceType client.ServiceType

// The service types that get virtual servers.
const (
	ClusterIPService    = ServiceType(client.ClusterIP)
	NodePortService     = ServiceType(client.NodePort)
	LoadBalancerService = ServiceType(client.LoadBalancer)
)

// String returns the type's name.
func (st ServiceType) String() string { return string(st) }

// SessionAffinity is the seed's session affinity: a service's ClientIP
// affinity (client.SessionAffinity), nil when off.
type SessionAffinity struct {
	ClientIP *client.SessionAffinity
}

// The seed's chain names, for code written against it.
const (
	KubeFireWallChain     = rules.ChainProxyFirewall
	KubeForwardChain      = rules.ChainForward
	KubeLoadBalancerChain = rules.ChainLoadBalancer
	KubeMarkMasqChain     = rules.ChainMarkMasq
	KubeNodePortChain     = rules.ChainNodePort
)

// GetNatRules returns the nat table rules of IPVS mode for a family, with
// the default masquerade bit (14).
func GetNatRules(supportsFullyRandomized bool, family xtables.Family) []rules.Rule {
	return tableRules(supportsFullyRandomized, family, "nat")
}

// GetFilterRules returns the filter table rules of IPVS mode for a family.
func GetFilterRules(supportsFullyRandomized bool, family xtables.Family) []rules.Rule {
	return tableRules(supportsFullyRandomized, family, "filter")
}

func tableRules(randomFully bool, f xtables.Family, table string) []rules.Rule {
	rs := rules.Build(rules.Config{MasqueradeBit: 14, RandomFully: randomFully}, f)
	var out []rules.Rule
	for _, j := range rs.Jumps {
		if j.Table == table {
			out = append(out, j.Rule())
		}
	}
	for _, r := range rs.Rules {
		if r.Table == table {
			out = append(out, r)
		}
	}
	return out
}

// Flags are the seed's backend flags, bound by BindFlags into a value the
// caller owns (no package-level state).
type Flags struct {
	DryRun           bool
	NodeAddresses    []netip.Addr
	SchedulingMethod string
	Weight           int
	MasqueradeAll    bool
}

type addrList struct{ l *[]netip.Addr }

func (a addrList) String() string {
	if a.l == nil {
		return ""
	}
	s := make([]string, len(*a.l))
	for i, x := range *a.l {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (a addrList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("%q is not an IP address", p)
		}
		*a.l = append(*a.l, ip)
	}
	return nil
}

// BindFlags registers the seed's flags on fs, filling f.
func BindFlags(fs *flag.FlagSet, f *Flags) {
	if f.SchedulingMethod == "" {
		f.SchedulingMethod = "rr"
	}
	if f.Weight == 0 {
		f.Weight = 1
	}
	fs.BoolVar(&f.DryRun, "dry-run", f.DryRun, "dry run (print instead of applying)")
	fs.Var(addrList{&f.NodeAddresses}, "node-address", "comma-separated IPs to serve NodePorts on (default: the node's addresses)")
	fs.StringVar(&f.SchedulingMethod, "scheduling-method", f.SchedulingMethod, "IPVS scheduler: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh")
	fs.IntVar(&f.Weight, "weight", f.Weight, "weight of every destination")
	fs.BoolVar(&f.MasqueradeAll, "masquerade-all", f.MasqueradeAll, "masquerade all traffic to cluster IPs")
}

// DefaultProxyModeAddress is where ServeProxyMode listens by default (kube-proxy's metrics
// address, which also answers /proxyMode).
var DefaultProxyModeAddress = "127.0.0.1:10249"

// SetUpHttpListen starts serving the controller's Handler (/proxyMode,
// /metrics, /healthz: the sink runtime's handler) on ProxyModeAddress
// (default 127.0.0.1:10249). A listen error, or no Handler, is returned at
// once; an error of the server later is logged.
func (c *Controller) SetUpHttpListen() error {
	ln, err := c.listenProxyMode()
	if err != nil {
		return err
	}
	go func() {
		if err := c.serveProxyMode(ln); err != nil {
			c.log.Error("/proxyMode server stopped", "address", ln.Addr().String(), "error", err)
		}
	}()
	return nil
}

// ServeProxyMode serves the controller's Handler on ProxyModeAddress until
// the server fails, and sends the error (or the listen error) to errCh.
func (c *Controller) ServeProxyMode(errCh chan error) {
	ln, err := c.listenProxyMode()
	if err != nil {
		errCh <- err
		return
	}
	if err := c.serveProxyMode(ln); err != nil {
		errCh <- err
	}
}

func (c *Controller) listenProxyMode() (net.Listener, error) {
	if c.Handler == nil {
		return nil, errors.New("seed: serve /proxyMode: no Handler (the sink runtime sets it)")
	}
	addr := c.ProxyModeAddress
	if addr == "" {
		addr = DefaultProxyModeAddress
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("seed: listen for /proxyMode on %s: %w", addr, err)
	}
	return ln, nil
}

func (c *Controller) serveProxyMode(ln net.Listener) error {
	srv := &http.Server{Handler: c.Handler, ReadHeaderTimeout: 10 * time.Second}
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("seed: serve /proxyMode on %s: %w", ln.Addr(), err)
}
