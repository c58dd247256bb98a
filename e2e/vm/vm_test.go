package vm_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

func TestExitStatusAndOutput(t *testing.T) {
	vm.Require(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "greet")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"hello from $(uname -r) in $PWD with $GREETING\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "data.txt"), []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out := vm.RunShell(t, "greet; cat data.txt; echo; echo in-vm=$PROXYSINKS_VM; exit 7", vm.Options{
		Files:   map[string]string{"greet": script},
		WorkDir: work,
		Env:     []string{"GREETING=it's me"},
	})
	if status != 7 {
		t.Errorf("exit status %d, want 7", status)
	}
	for _, want := range []string{"hello from ", "in /job/work with it's me", "payload", "in-vm=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PROXYSINKS-EXIT-") {
		t.Errorf("the exit marker leaked into the output:\n%s", out)
	}
}

func TestHungGuestIsKilled(t *testing.T) {
	vm.Require(t)
	start := time.Now()
	var out strings.Builder
	_, err := vm.Run(context.Background(), "echo going to sleep; sleep 3600", vm.Options{Timeout: 25 * time.Second, Output: &out})
	if !errors.Is(err, vm.ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	// The guest sleeps for an hour: a bound far below that shows it was
	// killed, with room for a slow boot on a loaded machine (60.5 s was
	// seen with the 25 s timeout while other VMs ran).
	if took := time.Since(start); took > 2*time.Minute {
		t.Errorf("killing the hung guest took %s", took)
	}
	if !strings.Contains(err.Error(), "going to sleep") {
		t.Errorf("the error should show the last console lines: %v", err)
	}
	t.Log(err)
}

func TestCrashingGuestIsReported(t *testing.T) {
	vm.Require(t)
	var out strings.Builder
	_, err := vm.Run(context.Background(), "echo c > /proc/sysrq-trigger; sleep 60", vm.Options{Timeout: 2 * time.Minute, Output: &out})
	if !errors.Is(err, vm.ErrNoStatus) {
		t.Fatalf("got %v, want ErrNoStatus", err)
	}
	t.Log(err)
}

// TestNIC checks the optional network card: the guest reaches a host
// listener through a forward, and nothing else (restrict=on: the host's
// loopback through qemu's gateway 10.0.2.2 stays closed).
func TestNIC(t *testing.T) {
	vm.Require(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "host got %s", line)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	cmd := `ip -4 addr show eth0 | grep -o 'inet [0-9./]*'
echo ping | nc -w 10 10.0.2.100 7000
if echo leak | nc -w 3 10.0.2.2 ` + port + ` | grep -q host; then echo gateway-open; else echo gateway-closed; fi`
	status, out := vm.RunShell(t, cmd, vm.Options{NIC: &vm.NIC{Forwards: []vm.Forward{{Guest: "10.0.2.100:7000", Host: l.Addr().String()}}}})
	if status != 0 {
		t.Errorf("exit status %d", status)
	}
	for _, want := range []string{"inet " + vm.GuestAddr, "host got ping", "gateway-closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
