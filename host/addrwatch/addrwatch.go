//go:build linux

// Package addrwatch lists the node's IP addresses and follows their
// changes: it subscribes to rtnetlink's address notifications
// (RTNLGRP_IPV4_IFADDR and RTNLGRP_IPV6_IFADDR), lists the addresses again
// shortly after a notification (a burst is listed once, or a few times)
// and delivers the new list when it differs. The addresses of the links named in Config.Exclude (the IPVS
// sinks' kube-ipvs0, which holds the services' addresses) are not the
// node's: they are left out, and their notifications cause no listing.
// Which of the addresses serve NodePorts is the caller's choice.
package addrwatch

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/link"
)

// DefaultSettle is how long a Watcher waits after a notification, for the
// rest of its burst, before it lists the addresses again (Config.Settle's
// default).
const DefaultSettle = 100 * time.Millisecond

// Config configures List and Watch.
type Config struct {
	// NetNS is a file descriptor of the network namespace to watch; 0
	// means the caller's.
	NetNS int
	// Exclude names the links whose addresses are not the node's.
	Exclude []string
	// Settle is how long after a notification the addresses are listed
	// again (the notifications meanwhile share the listing); 0 means
	// DefaultSettle.
	Settle time.Duration
}

// List returns the addresses of every link of the namespace except the
// excluded ones: loopback and link-local addresses included, sorted,
// without duplicates.
func List(cfg Config) ([]netip.Addr, error) {
	c, err := link.Dial(&link.Config{NetNS: cfg.NetNS})
	if err != nil {
		return nil, fmt.Errorf("addrwatch: list node addresses: %w", err)
	}
	defer c.Close()
	addrs, _, err := list(c, cfg.Exclude)
	return addrs, err
}

// list returns the node's addresses and the indexes of the excluded
// links.
func list(c *link.Conn, exclude []string) ([]netip.Addr, map[uint32]bool, error) {
	links, err := c.Links()
	if err != nil {
		return nil, nil, fmt.Errorf("addrwatch: list node addresses: %w", err)
	}
	skip := map[uint32]bool{}
	for _, l := range links {
		if slices.Contains(exclude, l.Name) {
			skip[l.Index] = true
		}
	}
	all, err := c.ListAddresses()
	if err != nil {
		return nil, nil, fmt.Errorf("addrwatch: list node addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range all {
		if !skip[a.Index] {
			out = append(out, a.Prefix.Addr())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), skip, nil
}

// Watcher follows the node's addresses. Watch makes one; Run delivers
// the changes; Close releases it.
type Watcher struct {
	cfg   Config
	lists *link.Conn
	sub   *rtnetlink.Conn
	last  []netip.Addr
	// skip holds the indexes of the excluded links, as the last listing
	// found them; read by the receiving goroutine.
	skip atomic.Pointer[map[uint32]bool]
}

// Watch subscribes to the namespace's address notifications, then lists
// the addresses (so that no change between the two is missed), and
// returns the watcher and the list.
func Watch(cfg Config) (*Watcher, []netip.Addr, error) {
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	sub, err := rtnetlink.Dial(&netlink.Config{NetNS: cfg.NetNS, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR})
	if err != nil {
		return nil, nil, fmt.Errorf("addrwatch: subscribe to address changes: %w", err)
	}
	lists, err := link.Dial(&link.Config{NetNS: cfg.NetNS})
	if err != nil {
		sub.Close()
		return nil, nil, fmt.Errorf("addrwatch: list node addresses: %w", err)
	}
	w := &Watcher{cfg: cfg, lists: lists, sub: sub}
	last, skip, err := list(lists, cfg.Exclude)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	w.last = last
	w.skip.Store(&skip)
	return w, slices.Clone(w.last), nil
}

// Close releases the watcher's sockets.
func (w *Watcher) Close() error {
	return errors.Join(w.sub.Close(), w.lists.Close())
}

// Run calls changed with the node's addresses each time they differ from
// the last list (Watch's, then changed's), listing them Config.Settle
// after the first notification of a change, until ctx ends (nil) or
// the subscription fails. A notification lost to a full socket buffer
// (ENOBUFS) is taken as a change. A failed listing is retried at the next
// notification; onError, when not nil, hears of it.
func (w *Watcher) Run(ctx context.Context, changed func([]netip.Addr), onError func(error)) error {
	notes := make(chan bool, 1)
	recvErr := make(chan error, 1)
	go func() { recvErr <- w.receive(notes) }()
	stop := context.AfterFunc(ctx, func() { w.sub.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			<-recvErr
			return nil
		case err := <-recvErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-notes:
			// Listed Settle after the first notification of a burst,
			// however long the burst: a later one lists again.
			if settle == nil {
				settle = time.After(w.cfg.Settle)
			}
		case <-settle:
			settle = nil
			addrs, skip, err := list(w.lists, w.cfg.Exclude)
			if err != nil {
				if onError != nil {
					onError(err)
				}
				continue
			}
			w.skip.Store(&skip)
			if !slices.Equal(addrs, w.last) {
				w.last = addrs
				changed(slices.Clone(addrs))
			}
		}
	}
}

// receive reads notifications until the socket fails, signalling notes
// for each batch that concerns a link not excluded (or an unknown one:
// the next listing learns it).
func (w *Watcher) receive(notes chan<- bool) error {
	for {
		msgs, _, err := w.sub.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			signal(notes)
			continue
		}
		if err != nil {
			return fmt.Errorf("addrwatch: receive address changes: %w", err)
		}
		for _, m := range msgs {
			if a, ok := m.(*rtnetlink.AddressMessage); ok && (*w.skip.Load())[a.Index] {
				continue
			}
			signal(notes)
			break
		}
	}
}

// signal sends on a one-slot channel without blocking.
func signal(ch chan<- bool) {
	select {
	case ch <- true:
	default:
	}
}
