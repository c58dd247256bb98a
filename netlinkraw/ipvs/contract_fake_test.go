package ipvs_test

import (
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// dialFake returns a connection to a new fake IPVS.
func dialFake(t *testing.T, opts ...ipvstest.Option) (*ipvs.Conn, *ipvstest.Kernel) {
	t.Helper()
	k := ipvstest.New(opts...)
	c, err := k.Conn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, k
}

func TestContractFake(t *testing.T) {
	contract(t, target{
		dial: func(t *testing.T) *ipvs.Conn {
			c, _ := dialFake(t)
			return c
		},
		schedulers: ipvstest.DefaultSchedulers,
	})
}
