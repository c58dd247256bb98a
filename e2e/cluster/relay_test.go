package cluster_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// relay forwards TCP connections from a loopback port to the apiserver,
// and can cut them: a client behind it loses the apiserver while the
// apiserver stays up for everyone else.
type relay struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r := &relay{l: l, target: target}
	t.Cleanup(func() { l.Close(); r.setCut(true) })
	go r.serve()
	return r
}

// Server is the relay's URL.
func (r *relay) Server() string { return "https://" + r.l.Addr().String() }

func (r *relay) serve() {
	for {
		in, err := r.l.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			r.mu.Unlock()
			in.Close()
			continue
		}
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

// setCut closes every relayed connection and refuses new ones (true), or
// accepts them again (false).
func (r *relay) setCut(cut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = cut
	if cut {
		for _, c := range r.conns {
			c.Close()
		}
		r.conns = nil
	}
}
