// Package netexec is the e2e tests' backend "pod" server and client, in the
// spirit of Kubernetes' agnhost netexec: a server answers every request with
// its pod name and the client address it saw, over TCP, UDP and SCTP; the
// client sends one request and returns the answer. Tests use the answers to
// see which backend served them and whether the client's address was kept.
//
// The protocol is one line each way: the client sends "hello\n", the server
// answers "<name> <client-ip>:<client-port>\n". TCP and SCTP connections may
// carry many requests.
package netexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Reply is a server's answer.
type Reply struct {
	Name   string
	Client netip.AddrPort
}

// ParseReply parses an answer line.
func ParseReply(line string) (Reply, error) {
	name, addr, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return Reply{}, fmt.Errorf("netexec: malformed reply %q", line)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return Reply{}, fmt.Errorf("netexec: malformed reply %q: %w", line, err)
	}
	return Reply{Name: name, Client: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
}

func answer(name string, client netip.AddrPort) string {
	return name + " " + netip.AddrPortFrom(client.Addr().Unmap(), client.Port()).String() + "\n"
}

// Serve answers on port over TCP, UDP and (when the kernel has it) SCTP, on
// every address of both families, until ctx ends.
func Serve(ctx context.Context, name string, port int) error {
	var lc net.ListenConfig
	tl, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	ul, err := lc.ListenPacket(ctx, "udp", ":"+strconv.Itoa(port))
	if err != nil {
		tl.Close()
		return err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); serveStream(tl, name) }()
	go func() { defer wg.Done(); serveUDP(ul, name) }()
	sfd, serr := listenSCTP(port)
	if serr == nil {
		wg.Add(1)
		go func() { defer wg.Done(); serveSCTP(sfd, name) }()
	}
	<-ctx.Done()
	tl.Close()
	ul.Close()
	if serr == nil {
		unix.Shutdown(sfd, unix.SHUT_RDWR)
		unix.Close(sfd)
	}
	wg.Wait()
	return nil
}

func serveStream(l net.Listener, name string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			client := c.RemoteAddr().(*net.TCPAddr).AddrPort()
			r := bufio.NewReader(c)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				if _, err := io.WriteString(c, answer(name, client)); err != nil {
					return
				}
			}
		}()
	}
}

func serveUDP(c net.PacketConn, name string) {
	buf := make([]byte, 2048)
	for {
		_, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		c.WriteTo([]byte(answer(name, from.(*net.UDPAddr).AddrPort())), from)
	}
}

// listenSCTP opens a one-to-one SCTP socket (Go's net package has no SCTP)
// on both families.
func listenSCTP(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	if err := unix.Bind(fd, &unix.SockaddrInet6{Port: port}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 64); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func sockaddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

func serveSCTP(fd int, name string) {
	for {
		nfd, sa, err := unix.Accept(fd)
		if err != nil {
			return
		}
		go func() {
			f := os.NewFile(uintptr(nfd), "sctp")
			defer f.Close()
			client := sockaddrPort(sa)
			r := bufio.NewReader(f)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				if _, err := io.WriteString(f, answer(name, client)); err != nil {
					return
				}
			}
		}()
	}
}

// Get sends one request to addr over proto ("tcp", "udp" or "sctp") and
// returns the answer.
func Get(proto string, addr netip.AddrPort, timeout time.Duration) (Reply, error) {
	deadline := time.Now().Add(timeout)
	switch proto {
	case "tcp", "udp":
		c, err := net.DialTimeout(proto, addr.String(), timeout)
		if err != nil {
			return Reply{}, err
		}
		defer c.Close()
		if tc, ok := c.(*net.TCPConn); ok {
			// Close with a reset: IPVS then forgets the connection within
			// seconds instead of keeping it in TIME_WAIT for two minutes,
			// which would hold terminating destinations that long.
			tc.SetLinger(0)
		}
		c.SetDeadline(deadline)
		if _, err := io.WriteString(c, "hello\n"); err != nil {
			return Reply{}, err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return Reply{}, err
		}
		return ParseReply(line)
	case "sctp":
		return getSCTP(addr, timeout)
	}
	return Reply{}, fmt.Errorf("netexec: unknown protocol %q", proto)
}

func getSCTP(addr netip.AddrPort, timeout time.Duration) (Reply, error) {
	fam := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if addr.Addr().Is6() {
		fam, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
	if err != nil {
		return Reply{}, fmt.Errorf("netexec: sctp socket: %w", err)
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	f := os.NewFile(uintptr(fd), "sctp")
	defer f.Close()
	if err := unix.Connect(fd, sa); err != nil {
		return Reply{}, fmt.Errorf("netexec: sctp connect %s: %w", addr, err)
	}
	if _, err := unix.Write(fd, []byte("hello\n")); err != nil {
		return Reply{}, err
	}
	buf := make([]byte, 512)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return Reply{}, fmt.Errorf("netexec: sctp read from %s: %w", addr, err)
	}
	if n == 0 {
		return Reply{}, errors.New("netexec: sctp: connection closed")
	}
	return ParseReply(string(buf[:n]))
}
