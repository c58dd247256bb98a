package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Stats counts a Conn's traffic, like the ipset and IPVS clients' counters:
// sendmsg and recvmsg calls, netlink messages and bytes each way.
type Stats = nlcore.Counters

// Config configures Dial.
type Config struct {
	// NetNS is a file descriptor of the network namespace to work in; 0
	// means the calling thread's.
	NetNS int
	// ReplyTimeout bounds each wait for a reply datagram (see
	// netlinkraw.ReplyTimeout): zero means netlinkraw.DefaultReplyTimeout,
	// negative no limit. A commit whose answer does not come fails with an
	// error matching netlinkraw.ErrReplyTimeout; whether it was applied is
	// then unknown (read the generation).
	ReplyTimeout time.Duration
}

// Conn is an nf_tables client over one nfnetlink socket. It is safe for
// concurrent use; calls are serialized.
type Conn struct {
	mu sync.Mutex
	nl *nlcore.Conn
}

// Socket sizes. The receive buffer holds the kernel's answers to a commit
// (an error per refused message; Commit raises it for larger
// transactions) and dump datagrams (at most 32 KiB each); recvBufSize is
// the largest datagram read.
const (
	recvBufSize  = 256 << 10
	socketRcvBuf = 4 << 20
)

// Dial opens an nfnetlink socket in the configured network namespace.
func Dial(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	nc, s, err := nlcore.DialSocket(unix.NETLINK_NETFILTER, cfg.NetNS, recvBufSize)
	if err != nil {
		return nil, fmt.Errorf("nft: dial nfnetlink: %w", err)
	}
	if err := s.SetAcks(true); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nft: dial nfnetlink: set ACK options: %w", err)
	}
	c := &Conn{nl: nlcore.NewConn(s, cfg.ReplyTimeout)}
	if c.nl.SendBuf, c.nl.RecvBuf, err = s.SetBuffers(0, socketRcvBuf); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nft: dial nfnetlink: size the socket buffers: %w", err)
	}
	return c, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nl.T.Close()
}

// Stats returns the traffic counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nl.Ctr
}

// SetReplyTimeout changes the bound on each wait for a reply datagram
// (Config.ReplyTimeout).
func (c *Conn) SetReplyTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nl.Timeout = netlinkraw.ReplyTimeout(d)
}

// Generation returns the nf_tables ruleset generation of the Conn's
// network namespace (NFT_MSG_GETGEN). The kernel keeps one generation per
// namespace, for every family and table, and every committed transaction
// that changes something increments it, whoever commits (nft,
// iptables-nft, firewalld, this package): an unchanged generation means
// an unchanged ruleset. Reading does not change it.
func (c *Conn) Generation() (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.generation()
}

// generation reads the generation; the caller holds c.mu.
func (c *Conn) generation() (uint32, error) {
	seq := c.nl.NextSeq(1)
	c.nl.Enc.Reset()
	off := c.nl.Enc.BeginMessage(nlcore.NfnlType(nlcore.NfnlSubsysNFTables, msgGetGen), nlcore.FlagRequest, seq)
	c.nl.Enc.Nfgen(unix.AF_UNSPEC, 0)
	c.nl.Enc.EndMessage(off)
	reply, err := c.nl.Request(seq, true, nlcore.NfnlType(nlcore.NfnlSubsysNFTables, msgNewGen))
	if err != nil {
		return 0, fmt.Errorf("nft: read the generation: %w", err)
	}
	return parseGeneration(reply)
}

// parseGeneration returns NFTA_GEN_ID of an NFT_MSG_NEWGEN message's
// payload (nfgenmsg and attributes).
func parseGeneration(b []byte) (uint32, error) {
	if len(b) < nlcore.NfgenLen {
		return 0, fmt.Errorf("nft: read the generation: answer of %d bytes, shorter than its header", len(b))
	}
	v, ok, err := nlcore.FindAttr(b[nlcore.NfgenLen:], attrGenID)
	switch {
	case err != nil:
		return 0, fmt.Errorf("nft: read the generation: %w", err)
	case !ok:
		return 0, errors.New("nft: read the generation: no NFTA_GEN_ID in the answer")
	case len(v) != 4:
		return 0, fmt.Errorf("nft: read the generation: %w", nlcore.BadLen("NFTA_GEN_ID", v))
	}
	return binary.BigEndian.Uint32(v), nil
}

// ReadGeneration returns the nf_tables ruleset generation of a network
// namespace (netns is a file descriptor of it; 0 means the calling
// thread's) over a connection of its own (see Conn.Generation).
func ReadGeneration(netns int) (uint32, error) {
	c, err := Dial(&Config{NetNS: netns})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.Generation()
}
