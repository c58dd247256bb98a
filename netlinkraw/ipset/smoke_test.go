package ipset_test

import (
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func TestSmoke(t *testing.T) {
	ns := nstest.New(t)
	c, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("proto %d", c.Protocol())
	if err := c.Create(ipset.Set{Name: "a", Type: ipset.HashIPPort, Family: ipset.INET, HashSize: 1024, MaxElem: 65536, Comment: true, Counters: true, Timeout: 100}); err != nil {
		t.Fatal(err)
	}
	err = c.Add("a", []ipset.Entry{{IP: netip.MustParseAddr("10.0.0.1"), Proto: ipset.TCP, Port: 80, Comment: "x"}, {IP: netip.MustParseAddr("10.0.0.2"), Proto: ipset.UDP, Port: 53}})
	t.Log(err)
	err = c.Add("a", []ipset.Entry{{IP: netip.MustParseAddr("10.0.0.3"), Proto: ipset.TCP, Port: 80}, {IP: netip.MustParseAddr("10.0.0.2"), Proto: ipset.UDP, Port: 53}, {IP: netip.MustParseAddr("10.0.0.4"), Proto: ipset.UDP, Port: 53}})
	t.Log(err)
	h, es, err := c.List("a")
	t.Logf("%+v %+v %v", h, es, err)
	t.Log(ns.MustRun(t, "ipset", "save"))
	t.Logf("%+v", c.Stats())
}
