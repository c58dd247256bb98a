package nstest_test

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"golang.org/x/sys/unix"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestNewIsolated(t *testing.T) {
	ns := nstest.New(t)
	if host, got := inode(t, "/proc/thread-self/ns/net"), inode(t, ns.Path()); host == got {
		t.Fatalf("namespace inode %d equals the host's: not a fresh namespace", got)
	}

	// Inside, the thread sees the new namespace.
	var inside uint64
	if err := ns.Do(func() error {
		var st unix.Stat_t
		err := unix.Stat("/proc/thread-self/ns/net", &st)
		inside = st.Ino
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := inode(t, ns.Path()); inside != want {
		t.Fatalf("Do ran in namespace %d, want %d", inside, want)
	}

	// The caller's thread is still in the host namespace afterwards.
	if inode(t, "/proc/thread-self/ns/net") == inside {
		t.Fatal("the test goroutine's thread was left in the test namespace")
	}
}

func TestLoopbackTraffic(t *testing.T) {
	ns := nstest.New(t)
	err := ns.Do(func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Write([]byte("pong"))
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 4)
		if _, err := c.Read(buf); err != nil {
			return err
		}
		if string(buf) != "pong" {
			t.Errorf("got %q, want pong", buf)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("loopback traffic inside the namespace: %v", err)
	}
}

func TestRunSeesOnlyItsNamespace(t *testing.T) {
	nstest.LookPath(t, "ip")
	a, b := nstest.New(t), nstest.New(t)
	a.MustRun(t, "ip", "link", "add", "nstest0", "type", "veth", "peer", "name", "nstest1")
	if out := a.MustRun(t, "ip", "-o", "link", "show"); !strings.Contains(out, "nstest0") {
		t.Fatalf("link missing in its own namespace:\n%s", out)
	}
	if out := b.MustRun(t, "ip", "-o", "link", "show"); strings.Contains(out, "nstest0") {
		t.Fatalf("link leaked into another namespace:\n%s", out)
	}
	if _, err := os.Stat("/sys/class/net/nstest0"); err == nil {
		t.Fatal("link leaked into the host namespace")
	}
	if _, err := a.Run("ip", "link", "add", "nstest0", "type", "veth", "peer", "name", "nstest1"); err == nil {
		t.Fatal("adding a duplicate link succeeded; Run must report a failing command")
	}
}
