// Package ipsettest holds an in-memory ipset for unit tests (Fake) and the
// contract suite (Contract) that both the fake and the kernel client pass,
// so the fake cannot drift from what the kernel does.
package ipsettest

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"syscall"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
)

// Fake is an in-memory ipset.Client with the kernel's semantics for the set
// types proxysinks uses. The zero value is not usable; call New.
type Fake struct {
	mu    sync.Mutex
	order []string
	sets  map[string]*fakeSet
	// Calls counts the calls made, by operation name ("add", "list"...).
	Calls map[string]int
	// faults are the injected failures (faults.go).
	faults faults
}

type fakeSet struct {
	hdr     ipset.Header
	entries map[ipset.Entry]ipset.Entry // key -> stored entry
}

var _ ipset.Client = (*Fake)(nil)

// New returns an empty fake.
func New() *Fake {
	return &Fake{sets: map[string]*fakeSet{}, Calls: map[string]int{}}
}

func opErr(op, obj string, err error) error {
	return &ipset.OpError{Op: op, Object: obj, Err: err}
}

// normalize fills in the kernel's defaults and rounding.
func normalize(s ipset.Set) ipset.Set {
	if s.Type == ipset.BitmapPort {
		s.Family = ipset.Unspec
		s.HashSize, s.MaxElem = 0, 0
		return s
	}
	s.PortFrom, s.PortTo = 0, 0
	if s.HashSize == 0 {
		s.HashSize = 1024
	}
	if s.HashSize < 64 {
		s.HashSize = 64
	}
	s.HashSize = 1 << bits.Len32(s.HashSize-1)
	if s.MaxElem == 0 {
		s.MaxElem = 65536
	}
	return s
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty set name")
	}
	if len(name) > 31 {
		return fmt.Errorf("set name %q longer than 31 bytes", name)
	}
	return nil
}

// doCreate is Create without injected faults.
func (f *Fake) doCreate(s ipset.Set, opts ...ipset.Option) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["create"]++
	obj := "set " + s.Name
	if err := checkName(s.Name); err != nil {
		return opErr("create", obj, err)
	}
	switch {
	case !slices.Contains(ipset.Types, s.Type):
		return opErr("create", obj, fmt.Errorf("%w: %q", ipset.ErrFindType, s.Type))
	case s.Type == ipset.BitmapPort && s.PortFrom > s.PortTo:
		return opErr("create", obj, fmt.Errorf("bitmap:port range %d-%d is reversed", s.PortFrom, s.PortTo))
	case s.Type != ipset.BitmapPort && s.Family != ipset.INET && s.Family != ipset.INET6:
		return opErr("create", obj, fmt.Errorf("%w: family %s for %s", ipset.ErrInvalidFamily, s.Family, s.Type))
	}
	n := normalize(s)
	if old, ok := f.sets[s.Name]; ok {
		if slices.Contains(opts, ipset.Exist) && old.hdr.Set == n {
			return nil
		}
		return opErr("create", obj, syscall.EEXIST)
	}
	f.sets[s.Name] = &fakeSet{hdr: ipset.Header{Set: n}, entries: map[ipset.Entry]ipset.Entry{}}
	f.order = append(f.order, s.Name)
	return nil
}

// doDestroy is Destroy without injected faults.
func (f *Fake) doDestroy(name string, opts ...ipset.Option) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["destroy"]++
	if err := checkName(name); err != nil {
		return opErr("destroy", "set "+name, err)
	}
	if _, ok := f.sets[name]; !ok {
		if slices.Contains(opts, ipset.Exist) {
			return nil
		}
		return opErr("destroy", "set "+name, syscall.ENOENT)
	}
	delete(f.sets, name)
	f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == name })
	return nil
}

// doFlush is Flush without injected faults.
func (f *Fake) doFlush(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["flush"]++
	s, ok := f.sets[name]
	if !ok {
		return opErr("flush", "set "+name, syscall.ENOENT)
	}
	s.entries = map[ipset.Entry]ipset.Entry{}
	return nil
}

// doRename is Rename without injected faults.
func (f *Fake) doRename(from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["rename"]++
	obj := "set " + from + " to " + to
	if err := checkName(to); err != nil {
		return opErr("rename", obj, err)
	}
	s, ok := f.sets[from]
	if !ok {
		return opErr("rename", obj, syscall.ENOENT)
	}
	if _, ok := f.sets[to]; ok {
		return opErr("rename", obj, ipset.ErrExistSetName2)
	}
	delete(f.sets, from)
	s.hdr.Name = to
	f.sets[to] = s
	f.order[slices.Index(f.order, from)] = to
	return nil
}

// doSwap is Swap without injected faults.
func (f *Fake) doSwap(a, b string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["swap"]++
	obj := "sets " + a + " and " + b
	sa, ok := f.sets[a]
	if !ok {
		return opErr("swap", obj, syscall.ENOENT)
	}
	sb, ok := f.sets[b]
	if !ok {
		return opErr("swap", obj, ipset.ErrExistSetName2)
	}
	if sa.hdr.Type != sb.hdr.Type || sa.hdr.Family != sb.hdr.Family {
		return opErr("swap", obj, ipset.ErrTypeMismatch)
	}
	sa.hdr.Name, sb.hdr.Name = b, a
	f.sets[a], f.sets[b] = sb, sa
	return nil
}

func (s *fakeSet) header() ipset.Header {
	h := s.hdr
	h.Elements = uint32(len(s.entries))
	return h
}

// doHeader is Header without injected faults.
func (f *Fake) doHeader(name string) (ipset.Header, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["header"]++
	s, ok := f.sets[name]
	if !ok {
		return ipset.Header{}, opErr("header", "set "+name, syscall.ENOENT)
	}
	return s.header(), nil
}

// doList is List without injected faults.
func (f *Fake) doList(name string) (ipset.Header, []ipset.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["list"]++
	s, ok := f.sets[name]
	if !ok {
		return ipset.Header{}, nil, opErr("list", "set "+name, syscall.ENOENT)
	}
	out := make([]ipset.Entry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e)
	}
	return s.header(), out, nil
}

// doListNames is ListNames without injected faults.
func (f *Fake) doListNames() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["listnames"]++
	return slices.Clone(f.order), nil
}

// key is how the kernel identifies an entry: its dimensions, with networks
// masked to their prefix.
func key(e ipset.Entry) ipset.Entry {
	k := e.Key()
	if k.Net.IsValid() {
		k.Net = k.Net.Masked()
	}
	return k
}

// check applies the kernel's per-entry checks that CheckEntry leaves to it.
func (s *fakeSet) check(e ipset.Entry) error {
	h := s.hdr
	if err := ipset.CheckEntry(h.Type, h.Family, e); err != nil {
		return err
	}
	switch h.Type {
	case ipset.HashIPPort, ipset.HashIPPortIP, ipset.HashIPPortNet:
		if e.Proto == 0 {
			return ipset.ErrMissingProto
		}
	case ipset.HashIP:
		if e.IP.IsUnspecified() {
			return ipset.ErrHashElem
		}
	case ipset.BitmapPort:
		if e.Port < h.PortFrom || e.Port > h.PortTo {
			return ipset.ErrBitmapRange
		}
	}
	if e.Net.IsValid() && e.Net.Bits() == 0 {
		return ipset.ErrInvalidCIDR
	}
	switch {
	case e.Timeout != 0 && h.Timeout == 0:
		return ipset.ErrTimeout
	case (e.Packets != 0 || e.Bytes != 0) && !h.Counters:
		return ipset.ErrCounter
	case e.Comment != "" && !h.Comment:
		return ipset.ErrComment
	}
	return nil
}

// stored returns e as the kernel keeps it.
func (s *fakeSet) stored(e ipset.Entry) ipset.Entry {
	k := key(e)
	k.NoMatch = e.NoMatch
	k.Comment = e.Comment
	if s.hdr.Timeout != 0 {
		k.Timeout = e.Timeout
		if k.Timeout == 0 {
			k.Timeout = s.hdr.Timeout
		}
	}
	if s.hdr.Counters {
		k.Packets, k.Bytes = e.Packets, e.Bytes
	}
	return k
}

// adt applies entries one by one, like the kernel's batch processing.
func (f *Fake) adt(op, set string, entries []ipset.Entry, opts []ipset.Option) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls[op]++
	s, ok := f.sets[set]
	if !ok {
		return opErr(op, "entries of set "+set, syscall.ENOENT)
	}
	exist := slices.Contains(opts, ipset.Exist)
	var failed []ipset.EntryError
	for i, e := range entries {
		err := f.faults.next()
		if err == nil {
			err = s.check(e)
		}
		if err == nil {
			k := key(e)
			_, present := s.entries[k]
			switch {
			case op == "add" && present && !exist:
				err = ipset.ErrExist
			case op == "add" && !present && s.hdr.Type.IsHash() && uint32(len(s.entries)) >= s.hdr.MaxElem:
				err = ipset.ErrHashFull
			case op == "add":
				s.entries[k] = s.stored(e)
			case !present && !exist:
				err = ipset.ErrNotFound
			default:
				delete(s.entries, k)
			}
		}
		if err != nil {
			failed = append(failed, ipset.EntryError{Index: i, Entry: e, Err: err})
		}
	}
	if len(failed) > 0 {
		return &ipset.BatchError{Op: op, Set: set, Failed: failed}
	}
	return nil
}

// doAdd is Add without injected faults.
func (f *Fake) doAdd(set string, entries []ipset.Entry, opts ...ipset.Option) error {
	return f.adt("add", set, entries, opts)
}

// doDel is Del without injected faults.
func (f *Fake) doDel(set string, entries []ipset.Entry, opts ...ipset.Option) error {
	return f.adt("del", set, entries, opts)
}

// Test implements ipset.Client.
func (f *Fake) Test(set string, e ipset.Entry) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls["test"]++
	obj := e.String() + " in " + set
	s, ok := f.sets[set]
	if !ok {
		return false, opErr("test", obj, syscall.ENOENT)
	}
	if err := ipset.CheckEntry(s.hdr.Type, s.hdr.Family, e); err != nil {
		return false, opErr("test", obj, err)
	}
	if s.check(e) != nil {
		return false, nil // the kernel answers "not found" to any failed test
	}
	got, ok := s.entries[key(e)]
	return ok && got.NoMatch == e.NoMatch, nil
}

// Close implements ipset.Client.
func (f *Fake) Close() error { return nil }
