package vm_test

import (
	"context"
	"errors"
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
	if took := time.Since(start); took > 60*time.Second {
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
