package healthcheck

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// ServiceConfig says where health-check node ports listen.
type ServiceConfig struct {
	// IPv4 and IPv6 are the families the sink serves; each family gets its
	// own listener per port and reports its own endpoint count, as
	// kube-proxy's per-family proxiers do.
	IPv4, IPv6 bool
	// Addresses are the node addresses to listen on (the node addresses
	// matching --nodeport-addresses). Empty means every address: one
	// wildcard listener per family.
	Addresses []netip.Addr
	// Health, when set, is reported as serviceProxyHealthy, and a sink
	// that is not live answers 503 whatever its endpoints.
	Health *ProxyHealth
	// Log receives listen failures and closes; nil discards them.
	Log *slog.Logger
}

// ServiceServer runs one HTTP server per externalTrafficPolicy=Local
// service on its healthCheckNodePort. The server answers 200 while the node
// has at least one ready local endpoint of the service (counted by address,
// in the listener's family), and 503 otherwise, with kube-proxy's JSON body.
// Servers open and close as services come and go; a port that cannot be
// opened is retried at every Sync. Safe for concurrent use.
type ServiceServer struct {
	cfg ServiceConfig
	log *slog.Logger

	mu       sync.Mutex
	services map[client.ServiceKey]*instance
}

// instance is one service's servers.
type instance struct {
	port      int
	endpoints [2]int // ready local endpoint addresses: IPv4, IPv6
	servers   []*http.Server
	err       error // the last listen error; servers is empty then
}

// NewServiceServer returns a server with nothing open.
func NewServiceServer(cfg ServiceConfig) *ServiceServer {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ServiceServer{cfg: cfg, log: log, services: map[client.ServiceKey]*instance{}}
}

// HealthCheckPort returns the service's health-check node port, or 0 when
// it needs none.
func HealthCheckPort(s *client.Service) int {
	if s == nil || !s.ExternalTrafficLocal || s.HealthCheckNodePort <= 0 || s.HealthCheckNodePort > 65535 {
		return 0
	}
	return s.HealthCheckNodePort
}

// LocalReadyEndpoints counts the distinct addresses of the family (IPv6
// when v6) of the service's local endpoints that are ready. Terminating
// endpoints do not count even while they serve: a node with only those
// must fail its health check so load balancers drain it.
func LocalReadyEndpoints(se *client.ServiceEndpoints, v6 bool) int {
	var seen []netip.Addr
	for _, e := range se.Endpoints {
		if !e.Local || !e.Ready {
			continue
		}
		for _, a := range e.IPs.Family(v6) {
			if !slices.Contains(seen, a) {
				seen = append(seen, a)
			}
		}
	}
	return len(seen)
}

// Sync applies a snapshot: every changed service is updated (all of them
// when the snapshot is Full), and ports that failed to open are retried.
// The error names every service whose port could not be opened.
func (s *ServiceServer) Sync(snap *client.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if snap.Full {
		keep := map[client.ServiceKey]bool{}
		for se := range snap.All() {
			keep[se.Service.Key()] = true
			s.set(se)
		}
		for k := range s.services {
			if !keep[k] {
				s.remove(k)
			}
		}
	} else {
		for _, c := range snap.Changes {
			if c.Service == nil {
				s.remove(c.Key)
			} else {
				s.set(c.Service)
			}
		}
	}
	return s.retry()
}

// Set adds, updates or (when the service needs no health check any more)
// removes one service. It returns the listen error, if any; the port is
// retried at the next Sync.
func (s *ServiceServer) Set(se *client.ServiceEndpoints) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set(se)
	if in := s.services[se.Service.Key()]; in != nil {
		return in.err
	}
	return nil
}

// Delete closes the servers of a service.
func (s *ServiceServer) Delete(k client.ServiceKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(k)
}

// Ports returns the open (or wanted) health-check ports by service.
func (s *ServiceServer) Ports() map[client.ServiceKey]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[client.ServiceKey]int, len(s.services))
	for k, in := range s.services {
		out[k] = in.port
	}
	return out
}

// Close closes every server.
func (s *ServiceServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.services {
		s.remove(k)
	}
}

func (s *ServiceServer) set(se *client.ServiceEndpoints) {
	k := se.Service.Key()
	port := HealthCheckPort(se.Service)
	in := s.services[k]
	if in != nil && in.port != port {
		s.remove(k)
		in = nil
	}
	if port == 0 {
		return
	}
	if in == nil {
		in = &instance{port: port}
		s.services[k] = in
		s.open(k, in)
	}
	in.endpoints = [2]int{LocalReadyEndpoints(se, false), LocalReadyEndpoints(se, true)}
}

func (s *ServiceServer) remove(k client.ServiceKey) {
	in := s.services[k]
	if in == nil {
		return
	}
	delete(s.services, k)
	in.close()
	s.log.Info("health check closed", "service", k, "port", in.port)
}

func (s *ServiceServer) retry() error {
	var errs []error
	for _, k := range s.sortedKeys() {
		in := s.services[k]
		if in.err != nil {
			s.open(k, in)
			if in.err != nil {
				errs = append(errs, in.err)
			}
		}
	}
	return errors.Join(errs...)
}

func (s *ServiceServer) sortedKeys() []client.ServiceKey {
	keys := make([]client.ServiceKey, 0, len(s.services))
	for k := range s.services {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, client.ServiceKey.Compare)
	return keys
}

// listenAddrs returns the (network, address) pairs a port listens on.
func (s *ServiceServer) listenAddrs(port int) [][2]string {
	p := strconv.Itoa(port)
	var out [][2]string
	if len(s.cfg.Addresses) == 0 {
		if s.cfg.IPv4 {
			out = append(out, [2]string{"tcp4", net.JoinHostPort("0.0.0.0", p)})
		}
		if s.cfg.IPv6 {
			out = append(out, [2]string{"tcp6", net.JoinHostPort("::", p)})
		}
		return out
	}
	for _, a := range s.cfg.Addresses {
		if a.Is4() && s.cfg.IPv4 {
			out = append(out, [2]string{"tcp4", net.JoinHostPort(a.String(), p)})
		} else if a.Is6() && s.cfg.IPv6 {
			out = append(out, [2]string{"tcp6", net.JoinHostPort(a.String(), p)})
		}
	}
	return out
}

// open starts the instance's servers, or records why it could not: then
// nothing of it is open, so a later retry starts clean.
func (s *ServiceServer) open(k client.ServiceKey, in *instance) {
	in.err = nil
	for _, na := range s.listenAddrs(in.port) {
		ln, err := net.Listen(na[0], na[1])
		if err != nil {
			in.close()
			in.err = fmt.Errorf("healthcheck: open health check node port %d of service %s on %s: %w", in.port, k, na[1], err)
			s.log.Error("health check not served; retried at the next sync", "error", in.err)
			return
		}
		srv := &http.Server{Handler: s.handler(k, na[0] == "tcp6"), ReadHeaderTimeout: 10 * time.Second}
		in.servers = append(in.servers, srv)
		go srv.Serve(ln) // returns ErrServerClosed when closed
	}
	s.log.Info("health check open", "service", k, "port", in.port)
}

func (in *instance) close() {
	for _, srv := range in.servers {
		srv.Close()
	}
	in.servers = nil
}

// serviceBody is kube-proxy's health-check answer.
type serviceBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (s *ServiceServer) handler(k client.ServiceKey, v6 bool) http.Handler {
	fam := 0
	if v6 {
		fam = 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		in := s.services[k]
		count := 0
		if in != nil {
			count = in.endpoints[fam]
		}
		s.mu.Unlock()
		if in == nil {
			// Closed between accept and answer.
			http.Error(w, "health check closed", http.StatusServiceUnavailable)
			return
		}
		healthy := true
		if s.cfg.Health != nil {
			healthy = s.cfg.Health.Live().Healthy
		}
		var b serviceBody
		b.Service.Namespace, b.Service.Name = k.Namespace, k.Name
		b.LocalEndpoints, b.ServiceProxyHealthy = count, healthy
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		writeJSON(w, b)
	})
}
