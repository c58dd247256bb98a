//go:build linux

package ipset

import (
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Dial opens an nfnetlink socket in the configured namespace and negotiates
// the ipset protocol (7, or 6 on older kernels).
func Dial(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	nc, s, err := nlcore.DialSocket(unix.NETLINK_NETFILTER, cfg.NetNS, recvBufSize)
	if err != nil {
		return nil, &OpError{Op: "dial", Object: "nfnetlink", Err: err}
	}
	batch := cfg.BatchBytes
	if batch <= 0 {
		batch = defaultBatchBytes
	}
	c := *cfg
	c.BatchBytes, c.replyBudget, err = sizeBuffers(s, batch)
	if err != nil {
		nc.Close()
		return nil, &OpError{Op: "dial", Object: "nfnetlink", Err: err}
	}
	return newConn(s, c)
}

// recvBufSize holds any datagram the kernel sends ipset clients: dump
// datagrams are at most 32 KiB, copies of failed requests at most one
// message (maxADTBytes plus headers).
const recvBufSize = 256 << 10

// sizeBuffers sizes the socket buffers for batches of batch bytes and
// returns the batch size that fits and the budget for the kernel's answers
// to one batch. The receive buffer must hold the answers to a whole batch,
// which the kernel queues before sendmsg returns: at worst a copy of every
// message. Errors carry no copy of the request (capped ACKs) except ipset's
// own, which carry the failing line.
func sizeBuffers(s *nlcore.Socket, batch int) (int, int, error) {
	if err := s.SetAcks(false); err != nil {
		return 0, 0, err
	}
	snd, rcv, err := s.SetBuffers(batch+batch/4, 8*batch)
	if err != nil {
		return 0, 0, err
	}
	// The kernel reports doubled values; keep a margin anyway.
	if limit := snd / 2; batch > limit {
		batch = limit
	}
	// The reported size counts socket buffer overhead (it is what the
	// kernel compares against); keep half of it as a margin.
	budget := rcv / 2
	if limit := budget / 2; batch > limit {
		batch = limit
	}
	return max(batch, 64<<10), budget, nil
}
