package ipvs

import (
	"errors"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw"
	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Counters count the traffic of a Conn, for benchmarks and metrics:
// sendmsg and recvmsg calls, netlink messages and bytes each way.
type Counters = nlcore.Counters

// Conn is a generic netlink connection to the kernel's IPVS in one network
// namespace. It is safe for concurrent use; operations are serialized.
type Conn struct {
	mu       sync.Mutex
	nl       *nlcore.Conn
	family   uint16
	maxMsgs  int
	maxBytes int
	chunks   [2]chunk // Apply's encoding buffers
}

// SetReplyTimeout changes the bound on each wait for a reply datagram
// (Options.ReplyTimeout: zero means netlinkraw.DefaultReplyTimeout,
// negative no limit).
func (c *Conn) SetReplyTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nl.Timeout = netlinkraw.ReplyTimeout(d)
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nl.T.Close()
}

// Counters returns the traffic counted so far.
func (c *Conn) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nl.Ctr
}

// reqError wraps the error of a request that is not a batch operation.
func reqError(op string, k *ServiceKey, err error) error {
	return &Error{Op: op, Service: k, Err: err}
}

// request sends one message built by attrs and returns the payload of its
// reply (reply set) or waits for its ACK.
func (c *Conn) request(cmd uint8, reply bool, attrs func(*nlcore.Encoder)) ([]byte, error) {
	seq := c.nl.NextSeq(1)
	flags := uint16(nlcore.FlagRequest)
	if !reply {
		flags |= nlcore.FlagAck
	}
	e := &c.nl.Enc
	e.Reset()
	off := e.BeginMessage(c.family, flags, seq)
	e.Genl(cmd, uapi.GenlVersion)
	if attrs != nil {
		attrs(e)
	}
	e.EndMessage(off)
	return c.nl.Request(seq, reply, c.family)
}

// dump runs a dump request, calling reset before each attempt and each for
// every entry. A dump interrupted by concurrent changes is restarted.
func (c *Conn) dump(cmd uint8, attrs func(*nlcore.Encoder), reset func(), each func(data []byte) error) error {
	return c.nl.Dump(nlcore.DumpRequest{
		Type: c.family,
		Payload: func(e *nlcore.Encoder) {
			e.Genl(cmd, uapi.GenlVersion)
			if attrs != nil {
				attrs(e)
			}
		},
		Reset: reset,
		Each: func(m *nlcore.Message) error {
			if m.Type != c.family {
				return nil
			}
			return each(m.Data)
		},
	})
}

// Info returns the IPVS version and connection table size.
func (c *Conn) Info() (Info, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := c.request(uapi.CmdGetInfo, true, nil)
	if err != nil {
		return Info{}, reqError("get info", nil, err)
	}
	i, err := decodeInfo(b)
	if err != nil {
		return Info{}, reqError("decode info", nil, err)
	}
	return i, nil
}

// Config returns the connection timeouts.
func (c *Conn) Config() (Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := c.request(uapi.CmdGetConfig, true, nil)
	if err != nil {
		return Config{}, reqError("get config", nil, err)
	}
	cfg, err := decodeConfig(b)
	if err != nil {
		return Config{}, reqError("decode config", nil, err)
	}
	return cfg, nil
}

// SetConfig sets the connection timeouts; zero fields stay unchanged.
func (c *Conn) SetConfig(cfg Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.request(uapi.CmdSetConfig, false, func(e *nlcore.Encoder) {
		if cfg.TCP != 0 {
			e.U32(uapi.CmdAttrTimeoutTCP, cfg.TCP)
		}
		if cfg.TCPFin != 0 {
			e.U32(uapi.CmdAttrTimeoutTCPFin, cfg.TCPFin)
		}
		if cfg.UDP != 0 {
			e.U32(uapi.CmdAttrTimeoutUDP, cfg.UDP)
		}
	})
	if err != nil {
		return reqError("set config", nil, err)
	}
	return nil
}

// Services lists every virtual service with its counters.
func (c *Conn) Services() ([]ServiceEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ServiceEntry
	err := c.dump(uapi.CmdGetService, nil, func() { out = out[:0] }, func(data []byte) error {
		e, err := decodeServiceMessage(data)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, reqError("list services", nil, err)
	}
	return out, nil
}

// keyService turns a key into a service for encoding.
func keyService(k ServiceKey) Service {
	return Service{Family: k.Family, Protocol: k.Protocol, Address: k.Address, Port: k.Port, FWMark: k.FWMark}
}

// Service returns the service with key k; an error matching unix.ESRCH
// if there is none.
func (c *Conn) Service(k ServiceKey) (ServiceEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := keyService(k)
	s, err := checkService(&ks, false)
	if err != nil {
		return ServiceEntry{}, reqError("get service", &k, err)
	}
	b, err := c.request(uapi.CmdGetService, true, func(e *nlcore.Encoder) { encodeService(e, s, false) })
	if err != nil {
		return ServiceEntry{}, reqError("get service", &k, err)
	}
	se, err := decodeServiceMessage(b)
	if err != nil {
		return ServiceEntry{}, reqError("decode service", &k, err)
	}
	return se, nil
}

// Destinations lists the destinations of the service with key k. Like the
// kernel, it returns an empty list when the service does not exist.
func (c *Conn) Destinations(k ServiceKey) ([]DestinationEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := keyService(k)
	s, err := checkService(&ks, false)
	if err != nil {
		return nil, reqError("list destinations of", &k, err)
	}
	var out []DestinationEntry
	err = c.dump(uapi.CmdGetDest, func(e *nlcore.Encoder) { encodeService(e, s, false) }, func() { out = out[:0] }, func(data []byte) error {
		d, err := decodeDestinationMessage(data, s.family)
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, reqError("list destinations of", &k, err)
	}
	return out, nil
}

// Flush removes every service and destination in the namespace. Sinks
// should not flush and rebuild: removed destinations stay in the kernel's
// trash list, which slows every later creation down.
func (c *Conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.request(uapi.CmdFlush, false, nil); err != nil {
		return reqError("flush", nil, err)
	}
	return nil
}

// ZeroAll zeroes the counters of every service and destination.
func (c *Conn) ZeroAll() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.request(uapi.CmdZero, false, nil); err != nil {
		return reqError("zero counters", nil, err)
	}
	return nil
}

// Zero zeroes the counters of one service and its destinations.
func (c *Conn) Zero(k ServiceKey) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := keyService(k)
	s, err := checkService(&ks, false)
	if err != nil {
		return reqError("zero counters of", &k, err)
	}
	if _, err := c.request(uapi.CmdZero, false, func(e *nlcore.Encoder) { encodeService(e, s, false) }); err != nil {
		return reqError("zero counters of", &k, err)
	}
	return nil
}

// CreateService creates a virtual service (EEXIST if it exists).
func (c *Conn) CreateService(s Service) error {
	return c.applyOp(Op{Kind: OpCreateService, Service: s})
}

// UpdateService changes the scheduler, flags, timeout, netmask and
// persistence engine of an existing service (ESRCH if there is none).
func (c *Conn) UpdateService(s Service) error {
	return c.applyOp(Op{Kind: OpUpdateService, Service: s})
}

// RemoveService removes a service and its destinations (ESRCH if there is
// none).
func (c *Conn) RemoveService(s Service) error {
	return c.applyOp(Op{Kind: OpRemoveService, Service: s})
}

// CreateDestination adds d to service s (EEXIST if it is there, ESRCH if
// the service does not exist).
func (c *Conn) CreateDestination(s Service, d Destination) error {
	return c.applyOp(Op{Kind: OpCreateDestination, Service: s, Destination: d})
}

// UpdateDestination changes the forwarding method, weight, thresholds and
// tunnel settings of a destination (ENOENT if there is none).
func (c *Conn) UpdateDestination(s Service, d Destination) error {
	return c.applyOp(Op{Kind: OpUpdateDestination, Service: s, Destination: d})
}

// RemoveDestination removes a destination from its service (ENOENT if
// there is none).
func (c *Conn) RemoveDestination(s Service, d Destination) error {
	return c.applyOp(Op{Kind: OpRemoveDestination, Service: s, Destination: d})
}

// applyOp applies a single operation and returns its error unwrapped from
// the batch.
func (c *Conn) applyOp(op Op) error {
	err := c.Apply([]Op{op})
	var be *BatchError
	if errors.As(err, &be) {
		return be.Errors[0]
	}
	return err
}
