package ipvstest

import (
	"iter"
	"os"
	"time"

	"github.com/mdlayher/netlink"
)

// socketPID is the netlink port id of the fake's connections.
const socketPID = 1

// datagram is one queued reply datagram.
type datagram struct {
	msgs    []netlink.Message
	readyAt time.Time // zero: at once
}

// push queues a reply datagram, unless an injected fault loses it. The
// caller holds c.mu and c.k.mu.
func (c *conn) push(msgs []netlink.Message) {
	lost, readyAt := c.k.faults.datagram()
	if lost {
		return
	}
	c.queue = append(c.queue, datagram{msgs: msgs, readyAt: readyAt})
}

// socket is the netlink.Conn's socket: sends go to the fake kernel, and
// receives take one queued datagram, waiting for it until the read
// deadline.
type socket struct {
	c        *conn
	deadline time.Time // guarded by c.mu
}

func (s *socket) Close() error { return nil }

func (s *socket) Send(m netlink.Message) error { return s.SendMessages([]netlink.Message{m}) }

func (s *socket) SendMessages(msgs []netlink.Message) error {
	s.c.handle(msgs)
	return nil
}

func (s *socket) Receive() ([]netlink.Message, error) {
	c := s.c
	for {
		c.mu.Lock()
		c.k.mu.Lock()
		errno := c.k.faults.receive()
		c.k.mu.Unlock()
		if errno != 0 {
			c.queue = nil // the replies the kernel could not queue are lost
			c.mu.Unlock()
			return nil, os.NewSyscallError("recvmsg", errno)
		}
		now := time.Now()
		deadline := s.deadline
		var wait time.Duration
		switch {
		case len(c.queue) > 0 && !c.queue[0].readyAt.After(now):
			d := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return d.msgs, nil
		case len(c.queue) > 0:
			wait = c.queue[0].readyAt.Sub(now)
		case deadline.IsZero():
			c.mu.Unlock()
			return nil, errWouldBlock
		}
		c.mu.Unlock()
		if !deadline.IsZero() {
			if !deadline.After(now) {
				return nil, os.ErrDeadlineExceeded
			}
			if left := deadline.Sub(now); wait == 0 || left < wait {
				wait = left
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.wake:
			t.Stop()
		}
	}
}

func (s *socket) ReceiveIter() iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		msgs, err := s.Receive()
		if err != nil {
			yield(netlink.Message{}, err)
			return
		}
		for _, m := range msgs {
			if !yield(m, nil) {
				return
			}
		}
	}
}

func (s *socket) SetDeadline(t time.Time) error { return s.SetReadDeadline(t) }

func (s *socket) SetReadDeadline(t time.Time) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.deadline = t
	return nil
}

func (s *socket) SetWriteDeadline(time.Time) error { return nil }
