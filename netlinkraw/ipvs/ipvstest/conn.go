package ipvstest

import "github.com/proxysinks/proxysinks/netlinkraw/ipvs"

// Conn returns an ipvs.Conn connected to the fake.
func (k *Kernel) Conn() (*ipvs.Conn, error) {
	return ipvs.NewConn(k.Dial())
}
