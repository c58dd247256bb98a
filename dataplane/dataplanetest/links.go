// Package dataplanetest holds test doubles for the dataplane: an in-memory
// dummy link (the build machines' kernel has no dummy links; the VM tests
// use the real one). IPVS and ipset have fakes of their own in netlinkraw.
package dataplanetest

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/proxysinks/proxysinks/netlinkraw/link"
)

// Links is an in-memory dataplane.Links: one dummy link and its addresses.
type Links struct {
	mu    sync.Mutex
	addrs map[netip.Addr]bool
}

// NewLinks returns an empty Links.
func NewLinks() *Links { return &Links{addrs: map[netip.Addr]bool{}} }

// EnsureDummy returns the link; it always exists.
func (f *Links) EnsureDummy(name string) (link.Link, error) { return link.Link{Name: name}, nil }

// Addresses returns the bound addresses, sorted.
func (f *Links) Addresses(string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]netip.Addr, 0, len(f.addrs))
	for a := range f.addrs {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// AddAddresses binds addresses; present ones are not errors.
func (f *Links) AddAddresses(_ string, as []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range as {
		f.addrs[a] = true
	}
	return nil
}

// DelAddresses unbinds addresses; absent ones are not errors.
func (f *Links) DelAddresses(_ string, as []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range as {
		delete(f.addrs, a)
	}
	return nil
}

// DeleteLink unbinds every address (the link itself always exists here).
func (f *Links) DeleteLink(string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.addrs)
	return nil
}

// Has reports whether addr is bound.
func (f *Links) Has(addr netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addrs[addr]
}

// Len returns the number of bound addresses.
func (f *Links) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.addrs)
}
