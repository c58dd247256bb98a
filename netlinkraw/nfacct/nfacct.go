// Package nfacct reads and creates the kernel's extended accounting
// objects (nfnetlink_acct, NFNL_SUBSYS_ACCT): named packet and byte
// counters that iptables rules count into with "-m nfacct --nfacct-name".
// kube-proxy's iptables mode keeps two of them
// (ct_state_invalid_dropped_pkts, localhost_nps_accepted_pkts) and exports
// their packets as metrics. Objects belong to a network namespace.
package nfacct

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// nfnetlink_acct's subsystem, commands and attributes
// (linux/netfilter/nfnetlink.h, nfnetlink_acct.h).
const (
	subsysAcct = 7 // NFNL_SUBSYS_ACCT
	cmdNew     = 0 // NFNL_MSG_ACCT_NEW
	cmdGet     = 1 // NFNL_MSG_ACCT_GET
	attrName   = 1 // NFACCT_NAME
	attrPkts   = 2 // NFACCT_PKTS
	attrBytes  = 3 // NFACCT_BYTES
)

// MaxName is the longest object name the kernel takes (NFACCT_NAME_MAX
// minus the terminating NUL).
const MaxName = 31

// Counter is an accounting object's name and counts.
type Counter struct {
	Name           string
	Packets, Bytes uint64
}

// Config configures a connection.
type Config struct {
	// NetNS is a file descriptor of the network namespace to work in (0:
	// the calling thread's).
	NetNS int
	// ReplyTimeout bounds each wait for the kernel's answer (see
	// netlinkraw.ReplyTimeout; 0: netlinkraw.DefaultReplyTimeout).
	ReplyTimeout time.Duration
}

// Conn is a connection to nfnetlink_acct. It is not safe for concurrent
// use.
type Conn struct {
	c *nlcore.Conn
}

// Dial opens an nfnetlink socket in the configured namespace. Whether the
// kernel has nfnetlink_acct shows at the first request (an error matching
// unix.EOPNOTSUPP, or unix.ENOENT for every name).
func Dial(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	_, s, err := nlcore.DialSocket(unix.NETLINK_NETFILTER, cfg.NetNS, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("nfacct: dial nfnetlink: %w", err)
	}
	return &Conn{c: nlcore.NewConn(s, cfg.ReplyTimeout)}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.T.Close() }

// checkName refuses a name the kernel would not take.
func checkName(op, name string) error {
	if name == "" || len(name) > MaxName {
		return fmt.Errorf("nfacct: %s %q: name must have 1 to %d bytes", op, name, MaxName)
	}
	return nil
}

// request sends one request for the object name with flags and returns the
// kernel's reply, when reply is set.
func (c *Conn) request(cmd uint8, flags uint16, name string, reply bool) ([]byte, error) {
	seq := c.c.NextSeq(1)
	e := &c.c.Enc
	e.Reset()
	off := e.BeginMessage(nlcore.NfnlType(subsysAcct, cmd), nlcore.FlagRequest|flags, seq)
	e.Nfgen(unix.AF_UNSPEC, 0)
	e.Str(attrName, name)
	e.EndMessage(off)
	return c.c.Request(seq, reply, nlcore.NfnlType(subsysAcct, cmdNew))
}

// Get returns the object named name. A missing object is an error
// matching unix.ENOENT.
func (c *Conn) Get(name string) (Counter, error) {
	if err := checkName("get", name); err != nil {
		return Counter{}, err
	}
	b, err := c.request(cmdGet, 0, name, true)
	if err != nil {
		return Counter{}, fmt.Errorf("nfacct: get %q: %w", name, err)
	}
	ctr, err := decode(b)
	if err != nil {
		return Counter{}, fmt.Errorf("nfacct: get %q: %w", name, err)
	}
	return ctr, nil
}

// Ensure creates the object named name unless it exists (its counts are
// then kept).
func (c *Conn) Ensure(name string) error {
	if err := checkName("create", name); err != nil {
		return err
	}
	if _, err := c.Get(name); err == nil || !errors.Is(err, unix.ENOENT) {
		return err
	}
	_, err := c.request(cmdNew, nlcore.FlagAck|nlcore.FlagCreate|nlcore.FlagExcl, name, false)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("nfacct: create %q: %w", name, err)
	}
	return nil
}

// decode reads an object from a reply's payload (nfgenmsg, attributes).
func decode(b []byte) (Counter, error) {
	if len(b) < nlcore.NfgenLen {
		return Counter{}, nlcore.BadLen("nfacct reply", b)
	}
	var ctr Counter
	var seen int
	err := nlcore.ForEachAttr(b[nlcore.NfgenLen:], func(typ uint16, v []byte) error {
		var err error
		switch typ & nlcore.AttrTypeMask {
		case attrName:
			ctr.Name = nlcore.GetString(v)
			seen++
		case attrPkts:
			ctr.Packets, err = nlcore.GetBE64("NFACCT_PKTS", v)
			seen++
		case attrBytes:
			ctr.Bytes, err = nlcore.GetBE64("NFACCT_BYTES", v)
			seen++
		}
		return err
	})
	if err == nil && seen != 3 {
		err = errors.New("reply lacks the name, packets or bytes")
	}
	return ctr, err
}
