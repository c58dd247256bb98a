package nftexpr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// hooks are the NF_INET_* hook numbers by nft's names.
var hooks = map[string]uint32{"prerouting": nft.HookPrerouting, "input": nft.HookInput, "forward": nft.HookForward, "output": nft.HookOutput, "postrouting": nft.HookPostrouting}

// priorities are nft's named priorities in the ip and ip6 families.
var priorities = map[string]int32{"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}

// Chain compiles a chain. A base chain has a type ("filter", "nat",
// "route"), a hook ("prerouting", ...) and a priority as nft reads it: a
// number, a name, or a name plus or minus a number ("dstnat - 10",
// "dstnat-10"); a regular chain has none of the three.
func Chain(name, typ, hook, priority, comment string) (nft.Chain, error) {
	c := nft.Chain{Name: name}
	if len(comment) > maxComment {
		return c, fmt.Errorf("nftexpr: chain %s: comment longer than %d bytes", name, maxComment)
	}
	c.UserData = Comment(comment)
	if typ == "" && hook == "" && priority == "" {
		return c, nil
	}
	switch typ {
	case "filter", "nat", "route":
	default:
		return c, fmt.Errorf("nftexpr: chain %s: type %q", name, typ)
	}
	h, ok := hooks[hook]
	if !ok {
		return c, fmt.Errorf("nftexpr: chain %s: hook %q", name, hook)
	}
	p, err := ParsePriority(priority)
	if err != nil {
		return c, fmt.Errorf("nftexpr: chain %s: %w", name, err)
	}
	c.Type, c.Hook, c.HasHook, c.Priority = typ, h, true, p
	c.Policy = 1 // NF_ACCEPT, nft's default (not sent)
	return c, nil
}

// ParsePriority reads a base chain priority of the ip or ip6 family.
func ParsePriority(s string) (int32, error) {
	t := strings.ReplaceAll(s, " ", "")
	if n, err := strconv.ParseInt(t, 10, 32); err == nil {
		return int32(n), nil
	}
	name, off := t, int64(0)
	if i := strings.IndexAny(t, "+-"); i > 0 {
		n, err := strconv.ParseInt(t[i:], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("priority %q", s)
		}
		name, off = t[:i], n
	}
	base, ok := priorities[name]
	if !ok {
		return 0, fmt.Errorf("priority %q", s)
	}
	return base + int32(off), nil
}
