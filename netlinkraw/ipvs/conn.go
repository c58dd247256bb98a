package ipvs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
)

// Options configure Dial. The zero value dials into the calling thread's
// network namespace with 4 MiB socket buffers.
type Options struct {
	// NetNS is a file descriptor of the network namespace to program (for
	// example from /proc/PID/ns/net or nstest). Zero means the current one.
	NetNS int
	// NetNSPath is a path that opens the namespace (e.g.
	// /var/run/netns/NAME); used when NetNS is zero.
	NetNSPath string
	// SendBuffer and ReceiveBuffer are the socket buffer sizes to ask for,
	// in bytes (default 4 MiB each; the kernel doubles them). They are
	// forced past the sysctl limits when the process has CAP_NET_ADMIN.
	// A larger send buffer allows larger batches per sendmsg; the receive
	// buffer must hold the error replies of a batch in which everything
	// fails.
	SendBuffer, ReceiveBuffer int
	// ReplyTimeout bounds the wait for each reply datagram: a kernel that
	// does not answer within it (a lost reply) fails the call with an
	// error matching netlinkraw.ErrReplyTimeout instead of blocking it
	// forever. Zero means netlinkraw.DefaultReplyTimeout; negative
	// disables it (netlinkraw.ReplyTimeout).
	ReplyTimeout time.Duration
}

// Counters count the traffic of a Conn, for benchmarks and metrics.
type Counters struct {
	Sendmsg          uint64 // send system calls (batches and requests)
	Recvmsg          uint64 // receive system calls
	MessagesSent     uint64 // netlink messages sent
	MessagesReceived uint64 // netlink messages received (replies, ACKs, errors)
	BytesSent        uint64
	BytesReceived    uint64
}

// Conn is a generic netlink connection to the kernel's IPVS in one network
// namespace. It is safe for concurrent use; operations are serialized.
type Conn struct {
	mu       sync.Mutex
	t        transport
	family   uint16
	seq      uint32
	maxMsgs  int
	maxBytes int
	enc      encoder
	chunks   [2]chunk // Apply's encoding buffers
	ctr      Counters
	// timeout bounds each wait for a reply datagram (0: none).
	timeout time.Duration
	// abandoned is the sequence number of the message ending the answer
	// to a dump that a call gave up on before that answer ended (0: none);
	// see dumpOnce.
	abandoned uint32
	// abandonedUnit is set when the abandoned dump went unfenced over a
	// transport of whole dumps: its answer is the next receive that is
	// empty or names it.
	abandonedUnit bool
	// stale is set when a call gave up waiting (a failed receive): late
	// answers may be on their way. Over a transport of whole dumps, dumps
	// are fenced until one sees its fence answered (see dumpOnce).
	stale bool
}

const defaultBuffer = 4 << 20

// Dial opens a connection to IPVS in the namespace the options name, or
// the current one. It returns an error matching ErrNotSupported when the
// kernel has no IPVS.
func Dial(o *Options) (*Conn, error) {
	if o == nil {
		o = &Options{}
	}
	ns := o.NetNS
	if ns == 0 && o.NetNSPath != "" {
		fd, err := unix.Open(o.NetNSPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("ipvs: dial: open network namespace %s: %w", o.NetNSPath, err)
		}
		defer unix.Close(fd)
		ns = fd
	}
	nc, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: ns})
	if err != nil {
		return nil, fmt.Errorf("ipvs: dial generic netlink: %w", err)
	}
	return newConn(nc, o)
}

// NewConn makes a Conn of an open generic netlink connection, which it
// takes over (Close closes it). Over a real socket it sends and receives
// with its own system calls; over a connection without one (a fake from
// nltest, or ipvstest's socket) it goes through nc's Send and Receive.
func NewConn(nc *netlink.Conn) (*Conn, error) {
	return newConn(nc, &Options{})
}

func newConn(nc *netlink.Conn, o *Options) (*Conn, error) {
	fam, err := genetlink.NewConn(nc).GetFamily(genlName)
	if err != nil {
		nc.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: generic netlink family %q: %w", ErrNotSupported, genlName, err)
		}
		return nil, fmt.Errorf("ipvs: look up generic netlink family %q: %w", genlName, err)
	}
	c := &Conn{family: fam.ID, seq: 1, timeout: netlinkraw.ReplyTimeout(o.ReplyTimeout)}
	rc, err := nc.SyscallConn()
	if err != nil {
		// No socket underneath (a test fake): fixed, modest batches.
		c.t = &connTransport{nc: nc, ctr: &c.ctr}
		c.maxMsgs, c.maxBytes = 1024, 1<<20
		return c, nil
	}
	snd, rcv, err := setBuffers(rc, o)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("ipvs: dial: %w", err)
	}
	c.t = &rawTransport{nc: nc, rc: rc, buf: make([]byte, receiveBufferSize), ctr: &c.ctr}
	c.setLimits(snd, rcv)
	return c, nil
}

// setBuffers sizes the socket buffers and turns on capped and extended
// ACKs; it returns the sizes the kernel granted (as getsockopt reports
// them, doubled).
func setBuffers(rc interface {
	Control(func(fd uintptr)) error
}, o *Options) (snd, rcv int, err error) {
	want := func(v int) int {
		if v <= 0 {
			return defaultBuffer
		}
		return v
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		f := int(fd)
		for _, b := range []struct{ force, plain, size int }{
			{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, want(o.SendBuffer)},
			{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, want(o.ReceiveBuffer)},
		} {
			if unix.SetsockoptInt(f, unix.SOL_SOCKET, b.force, b.size) != nil {
				if err := unix.SetsockoptInt(f, unix.SOL_SOCKET, b.plain, b.size); err != nil {
					serr = fmt.Errorf("set socket buffer: %w", err)
					return
				}
			}
		}
		// Errors carry no copy of the request (capped ACKs), and may
		// carry the kernel's explanation (extended ACKs). Both are
		// optional: old kernels lack them.
		_ = unix.SetsockoptInt(f, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
		_ = unix.SetsockoptInt(f, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
		snd, serr = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_SNDBUF)
		if serr != nil {
			return
		}
		rcv, serr = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	if cerr != nil {
		return 0, 0, cerr
	}
	return snd, rcv, serr
}

// ackTruesize is a generous estimate of the receive-buffer memory one
// queued error or ACK takes (the socket buffer overhead dominates).
const ackTruesize = 2048

// setLimits sizes batches: one sendmsg must fit the send buffer (the
// kernel refuses more than sk_sndbuf-32 bytes), and the replies of a batch
// that fails entirely must fit the receive buffer, or the kernel drops
// them.
func (c *Conn) setLimits(snd, rcv int) {
	c.maxBytes = snd - 32 - 4096
	if c.maxBytes < 4096 {
		c.maxBytes = 4096
	}
	c.maxMsgs = rcv / ackTruesize
	if c.maxMsgs < 16 {
		c.maxMsgs = 16
	}
}

// SetReplyTimeout changes the bound on each wait for a reply datagram
// (Options.ReplyTimeout: zero means netlinkraw.DefaultReplyTimeout,
// negative no limit).
func (c *Conn) SetReplyTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeout = netlinkraw.ReplyTimeout(d)
}

// receive waits for the next reply unit, within the reply timeout. It
// notices the end of an abandoned dump's answer, whichever call reads it.
func (c *Conn) receive() ([]message, error) {
	msgs, err := c.t.receive(netlinkraw.ReplyDeadline(c.timeout))
	if err != nil {
		// The call gives up: answers to it may still come.
		c.stale = true
	}
	if c.abandoned != 0 && err == nil {
		// A whole unfenced dump is one receive: empty, or naming it.
		if c.abandonedUnit && len(msgs) == 0 {
			c.abandoned = 0
		}
		for _, m := range msgs {
			if m.seq == c.abandoned && (c.abandonedUnit || m.typ == typeDone || m.typ == typeError) {
				c.abandoned = 0
			}
		}
	}
	return msgs, netlinkraw.ReplyError(err, c.timeout)
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.close()
}

// Counters returns the traffic counted so far.
func (c *Conn) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctr
}

// nextSeq returns n consecutive sequence numbers, skipping 0.
func (c *Conn) nextSeq(n int) uint32 {
	if c.seq == 0 || c.seq > ^uint32(0)-uint32(n) {
		c.seq = 1
	}
	s := c.seq
	c.seq += uint32(n)
	return s
}

// reqError wraps the error of a request that is not a batch operation.
func reqError(op string, k *ServiceKey, err error) error {
	return &Error{Op: op, Service: k, Err: err}
}

// errnoError turns a netlink error message into an error.
func errnoError(m message) error {
	err := error(unix.Errno(m.errno))
	if m.ext != "" {
		return fmt.Errorf("%w: %s", err, m.ext)
	}
	return err
}

// request sends one message built by attrs and returns the payload of its
// reply (reply set) or waits for its ACK.
func (c *Conn) request(cmd uint8, reply bool, attrs func(*encoder)) ([]byte, error) {
	seq := c.nextSeq(1)
	flags := uint16(flagRequest)
	if !reply {
		flags |= flagAck
	}
	c.enc.b = c.enc.b[:0]
	off := c.enc.beginMessage(c.family, flags, seq, cmd)
	if attrs != nil {
		attrs(&c.enc)
	}
	c.enc.endMessage(off)
	c.ctr.MessagesSent++
	if err := c.t.send(c.enc.b); err != nil {
		return nil, err
	}
	for {
		msgs, err := c.receive()
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.seq != seq {
				continue // a stale reply of an abandoned request
			}
			if m.typ == typeError {
				if m.errno != 0 {
					return nil, errnoError(m)
				}
				return nil, nil
			}
			if reply && m.typ == c.family {
				return append([]byte(nil), m.data...), nil
			}
		}
	}
}

// dump runs a dump request, calling reset before each attempt and each for
// every entry. A dump interrupted by concurrent changes is restarted.
func (c *Conn) dump(cmd uint8, attrs func(*encoder), reset func(), each func(data []byte) error) error {
	for attempt := 1; ; attempt++ {
		reset()
		intr, err := c.dumpOnce(cmd, attrs, each)
		if err != nil {
			return err
		}
		if !intr {
			return nil
		}
		if attempt == netlinkraw.MaxDumpAttempts {
			return fmt.Errorf("%w (%d times)", netlinkraw.ErrDumpInterrupted, attempt)
		}
	}
}

// errNoDumpAnswer is the error of a dump whose answer never came although
// the kernel answered the request sent after it (a fenced dump, below).
var errNoDumpAnswer = fmt.Errorf("%w: the dump's answer is missing (the request after it was answered)", netlinkraw.ErrReplyTimeout)

// dumpOnce runs one dump.
//
// A dump's answer is known complete when the message that ends it arrives:
// NLMSG_DONE (or an error) carrying the dump's sequence number. A transport
// that returns whole dumps (connTransport: netlink.Conn hides NLMSG_DONE,
// so an empty dump is an empty receive that names no request) cannot see
// it. There, once a call has given up waiting (c.stale: a late answer,
// perhaps an empty one, may still come), the dump request is followed, in
// the same send, by a fence (an NLMSG_NOOP asking for an ACK, which the
// kernel answers after the dump) and the dump ends with the fence's ACK:
// an empty receive before it is this dump's empty answer, and no answer at
// all before it is an error. The fence answered, everything sent before it
// has been read, and dumps go unfenced again (one receive each, as over a
// socket).
//
// A dump given up on before its end (a reply timeout, a failed receive)
// is recorded in c.abandoned; the next dump first reads the rest of it
// (finishAbandoned). Otherwise the kernel, still producing the old dump
// for this socket, would refuse the new one with EBUSY, and a fenceless
// old empty answer could pass for the new dump's.
func (c *Conn) dumpOnce(cmd uint8, attrs func(*encoder), each func(data []byte) error) (intr bool, err error) {
	if err := c.finishAbandoned(); err != nil {
		return false, err
	}
	fenced := c.t.wholeDumps() && c.stale
	n := 1
	if fenced {
		n = 2
	}
	seq := c.nextSeq(n)
	end := seq + uint32(n) - 1 // the message whose answer ends the dump's
	c.enc.b = c.enc.b[:0]
	off := c.enc.beginMessage(c.family, flagRequest|flagDump, seq, cmd)
	if attrs != nil {
		attrs(&c.enc)
	}
	c.enc.endMessage(off)
	if fenced {
		c.enc.fence(end)
	}
	c.ctr.MessagesSent += uint64(n)
	if err := c.t.send(c.enc.b); err != nil {
		return false, err
	}
	var (
		first    error // a decoding error; the dump is drained regardless
		answered bool  // fenced: this dump's answer (or error) was seen
		failed   error // fenced: the kernel's error for the dump request
	)
	for {
		msgs, err := c.receive()
		if err != nil {
			c.abandoned, c.abandonedUnit = end, c.t.wholeDumps() && !fenced
			return false, err
		}
		if len(msgs) == 0 && c.t.wholeDumps() {
			if !fenced {
				return intr, first // an empty dump: nothing stale can pass for it
			}
			answered = true // this dump's empty answer (older ones were read)
			continue
		}
		for _, m := range msgs {
			if fenced && m.seq == end && m.typ == typeError {
				c.stale = false
				switch {
				case failed != nil:
					return false, failed
				case !answered:
					return false, errNoDumpAnswer
				}
				return intr, first
			}
			if m.seq != seq {
				continue // a stale reply of an abandoned request
			}
			answered = true
			if m.flags&flagDumpIntr != 0 {
				intr = true
			}
			switch m.typ {
			case typeError:
				if m.errno != 0 {
					if fenced {
						failed = errnoError(m)
						continue
					}
					return false, errnoError(m)
				}
				if !fenced {
					return intr, first
				}
			case typeDone:
				if len(m.data) >= 4 {
					if e := -int32(native.Uint32(m.data)); e > 0 {
						return false, unix.Errno(e)
					}
				}
				return intr, first
			case c.family:
				if err := each(m.data); err != nil && first == nil {
					first = err
				}
			}
		}
		if answered && c.t.wholeDumps() && !fenced {
			return intr, first // the whole dump came in this receive
		}
	}
}

// finishAbandoned reads the rest of the answer to a dump that an earlier
// call gave up on (a reply timeout, a failed receive), skipping it, until
// its end: the kernel keeps producing such a dump for the socket, and
// refuses a new one with EBUSY until it is read. The kernel produces the
// rest as it is read, so this takes no longer than reading it. An end that
// does not come within the reply timeout is taken as lost and the caller
// goes on (a kernel still busy then answers EBUSY: an error, never a
// wrong answer); another failure fails the call and is retried by the next.
func (c *Conn) finishAbandoned() error {
	for c.abandoned != 0 {
		if _, err := c.receive(); err != nil {
			if errors.Is(err, netlinkraw.ErrReplyTimeout) {
				c.abandoned = 0
				return nil
			}
			return fmt.Errorf("finish reading the answer to an abandoned dump: %w", err)
		}
	}
	return nil
}

// Info returns the IPVS version and connection table size.
func (c *Conn) Info() (Info, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := c.request(cmdGetInfo, true, nil)
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
	b, err := c.request(cmdGetConfig, true, nil)
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
	_, err := c.request(cmdSetConfig, false, func(e *encoder) {
		if cfg.TCP != 0 {
			e.u32(cmdAttrTimeoutTCP, cfg.TCP)
		}
		if cfg.TCPFin != 0 {
			e.u32(cmdAttrTimeoutTCPFin, cfg.TCPFin)
		}
		if cfg.UDP != 0 {
			e.u32(cmdAttrTimeoutUDP, cfg.UDP)
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
	err := c.dump(cmdGetService, nil, func() { out = out[:0] }, func(data []byte) error {
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
	b, err := c.request(cmdGetService, true, func(e *encoder) { e.service(s, false) })
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
	err = c.dump(cmdGetDest, func(e *encoder) { e.service(s, false) }, func() { out = out[:0] }, func(data []byte) error {
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
	if _, err := c.request(cmdFlush, false, nil); err != nil {
		return reqError("flush", nil, err)
	}
	return nil
}

// ZeroAll zeroes the counters of every service and destination.
func (c *Conn) ZeroAll() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.request(cmdZero, false, nil); err != nil {
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
	if _, err := c.request(cmdZero, false, func(e *encoder) { e.service(s, false) }); err != nil {
		return reqError("zero counters of", &k, err)
	}
	return nil
}

// CreateService creates a virtual service (EEXIST if it exists).
func (c *Conn) CreateService(s Service) error {
	return c.one(Op{Kind: OpCreateService, Service: s})
}

// UpdateService changes the scheduler, flags, timeout, netmask and
// persistence engine of an existing service (ESRCH if there is none).
func (c *Conn) UpdateService(s Service) error {
	return c.one(Op{Kind: OpUpdateService, Service: s})
}

// RemoveService removes a service and its destinations (ESRCH if there is
// none).
func (c *Conn) RemoveService(s Service) error {
	return c.one(Op{Kind: OpRemoveService, Service: s})
}

// CreateDestination adds d to service s (EEXIST if it is there, ESRCH if
// the service does not exist).
func (c *Conn) CreateDestination(s Service, d Destination) error {
	return c.one(Op{Kind: OpCreateDestination, Service: s, Destination: d})
}

// UpdateDestination changes the forwarding method, weight, thresholds and
// tunnel settings of a destination (ENOENT if there is none).
func (c *Conn) UpdateDestination(s Service, d Destination) error {
	return c.one(Op{Kind: OpUpdateDestination, Service: s, Destination: d})
}

// RemoveDestination removes a destination from its service (ENOENT if
// there is none).
func (c *Conn) RemoveDestination(s Service, d Destination) error {
	return c.one(Op{Kind: OpRemoveDestination, Service: s, Destination: d})
}

// one applies a single operation and returns its error unwrapped from the
// batch.
func (c *Conn) one(op Op) error {
	err := c.Apply([]Op{op})
	var be *BatchError
	if errors.As(err, &be) {
		return be.Errors[0]
	}
	return err
}
