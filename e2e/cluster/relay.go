package cluster

import (
	"io"
	"net"
)

// Relay copies each connection accepted on l to a new TCP connection to
// target and back, until l is closed. It lets a client in a network
// namespace that cannot reach the apiserver (a fresh one, or a node's in
// the VM) use it through a listener created in that namespace, the
// connections to target dialled from the caller's.
func Relay(l net.Listener, target string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer out.Close()
			go func() {
				io.Copy(out, in)
				out.(*net.TCPConn).CloseWrite()
			}()
			io.Copy(in, out)
		}()
	}
}
