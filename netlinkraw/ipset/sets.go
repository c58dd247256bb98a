package ipset

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// checkSet validates a set description before it is sent.
func checkSet(s Set) error {
	if err := checkName(s.Name); err != nil {
		return err
	}
	if !s.Type.supported() {
		return fmt.Errorf("%w: %q", ErrFindType, s.Type)
	}
	if s.Type == BitmapPort {
		if s.PortFrom > s.PortTo {
			return fmt.Errorf("bitmap:port range %d-%d is reversed", s.PortFrom, s.PortTo)
		}
		return nil
	}
	if s.Family != INET && s.Family != INET6 {
		return fmt.Errorf("%w: family %s for %s", ErrInvalidFamily, s.Family, s.Type)
	}
	return nil
}

// Create creates a set.
func (c *Conn) Create(s Set, opts ...Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkSet(s); err != nil {
		return &OpError{Op: "create", Object: "set " + s.Name, Err: err}
	}
	f := s.Family
	if s.Type == BitmapPort {
		f = Unspec
	}
	rev, err := c.revision(s.Type, f)
	if err != nil {
		return &OpError{Op: "create", Object: "set " + s.Name + " of type " + string(s.Type), Err: err}
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, s.Name)
	a.Str(attrTypeName, string(s.Type))
	a.U8(attrRevision, rev)
	a.U8(attrFamily, uint8(f))
	createData(a, s)
	var flags uint16 = nlcore.FlagCreate
	if !hasExist(opts) {
		flags |= nlcore.FlagExcl
	}
	if err := c.simple(cmdCreate, flags, a); err != nil {
		return &OpError{Op: "create", Object: "set " + s.Name, Err: err}
	}
	c.types[s.Name] = setKind{s.Type, f}
	return nil
}

// Destroy destroys a set.
func (c *Conn) Destroy(name string, opts ...Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkName(name); err != nil {
		return &OpError{Op: "destroy", Object: "set " + name, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, name)
	var flags uint16
	if !hasExist(opts) {
		flags = nlcore.FlagExcl
	}
	err := c.simple(cmdDestroy, flags, a)
	if errors.Is(err, syscall.ENOENT) && hasExist(opts) {
		err = nil
	}
	if err != nil {
		return &OpError{Op: "destroy", Object: "set " + name, Err: err}
	}
	delete(c.types, name)
	return nil
}

// Flush removes every entry of a set.
func (c *Conn) Flush(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkName(name); err != nil {
		return &OpError{Op: "flush", Object: "set " + name, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, name)
	if err := c.simple(cmdFlush, 0, a); err != nil {
		return &OpError{Op: "flush", Object: "set " + name, Err: err}
	}
	return nil
}

// twoNames runs rename or swap.
func (c *Conn) twoNames(cmd uint8, op, from, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	obj := "set " + from + " to " + to
	if op == "swap" {
		obj = "sets " + from + " and " + to
	}
	if err := checkName(from); err != nil {
		return &OpError{Op: op, Object: obj, Err: err}
	}
	if err := checkName(to); err != nil {
		return &OpError{Op: op, Object: obj, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, from)
	a.Str(attrSetName2, to)
	if err := c.simple(cmd, 0, a); err != nil {
		return &OpError{Op: op, Object: obj, Err: err}
	}
	kf, okf := c.types[from]
	kt, okt := c.types[to]
	delete(c.types, from)
	delete(c.types, to)
	if op == "swap" {
		if okt {
			c.types[from] = kt
		}
		if okf {
			c.types[to] = kf
		}
	} else if okf {
		c.types[to] = kf
	}
	return nil
}

// Rename renames a set.
func (c *Conn) Rename(from, to string) error { return c.twoNames(cmdRename, "rename", from, to) }

// Swap swaps two sets.
func (c *Conn) Swap(a, b string) error { return c.twoNames(cmdSwap, "swap", a, b) }

// list runs a LIST dump of one set.
func (c *Conn) list(op, name string, flags uint32) (*listed, error) {
	if err := checkName(name); err != nil {
		return nil, &OpError{Op: op, Object: "set " + name, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, name)
	if flags != 0 {
		a.BE32(attrFlags|nlcore.AttrNetByteOrder, flags)
	}
	l, err := c.dump(a)
	if err != nil {
		return nil, &OpError{Op: op, Object: "set " + name, Err: err}
	}
	s, ok := l.sets[name]
	if !ok || !s.HaveHdr {
		return nil, &OpError{Op: op, Object: "set " + name, Err: errors.New("no header in the kernel's reply")}
	}
	c.types[name] = setKind{s.Header.Type, s.Header.Family}
	return s, nil
}

// Header returns a set's description.
func (c *Conn) Header(name string) (Header, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.list("header", name, flagListHeader)
	if err != nil {
		return Header{}, err
	}
	return s.Header, nil
}

// List returns a set's description and entries.
func (c *Conn) List(name string) (Header, []Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.list("list", name, 0)
	if err != nil {
		return Header{}, nil, err
	}
	return s.Header, s.Entries, nil
}

// ListNames returns the names of all sets in the namespace.
func (c *Conn) ListNames() ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := cmdAttrs(c.proto)
	a.BE32(attrFlags|nlcore.AttrNetByteOrder, flagListSetName)
	l, err := c.dump(a)
	if err != nil {
		return nil, &OpError{Op: "list", Object: "set names", Err: err}
	}
	return slices.Clone(l.order), nil
}

// Test reports whether set holds e.
func (c *Conn) Test(set string, e Entry) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	obj := e.String() + " in " + set
	if err := checkName(set); err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	k, err := c.kind(set)
	if err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	if err := CheckEntry(k.t, k.f, e); err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, set)
	appendEntry(a, k.t, e, 0)
	res, err := c.exchange([]nlcore.Request{c.msg(cmdTest, 0, a)}, true)
	if err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	switch res[0].code {
	case 0:
		return true, nil
	case int(ErrExist):
		return false, nil
	}
	return false, &OpError{Op: "test", Object: obj, Err: errnoFromKernel(res[0].code, k.t == BitmapPort)}
}

// kind returns the type and family of a set, from the cache or, the first
// time, from the kernel (one header dump).
func (c *Conn) kind(set string) (setKind, error) {
	if k, ok := c.types[set]; ok {
		return k, nil
	}
	a := cmdAttrs(c.proto)
	a.Str(attrSetName, set)
	a.BE32(attrFlags|nlcore.AttrNetByteOrder, flagListHeader)
	l, err := c.dump(a)
	if err != nil {
		return setKind{}, err
	}
	s, ok := l.sets[set]
	if !ok || !s.HaveHdr {
		return setKind{}, errors.New("no header in the kernel's reply")
	}
	k := setKind{s.Header.Type, s.Header.Family}
	c.types[set] = k
	return k, nil
}
