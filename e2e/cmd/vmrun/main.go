// Command vmrun boots the project's real-kernel VM and runs a shell command
// inside it, streaming the guest's console and exiting with the command's
// status:
//
//	go run ./e2e/cmd/vmrun -- 'modprobe ip_vs && ipvsadm -Ln'
//	go run ./e2e/cmd/vmrun -bin ./ipvs.test -- 'ipvs.test -test.v'
//
// Files given with -bin are copied into the guest's $PATH. The exit status
// is 124 when the guest hangs past -timeout and 125 when it stops without
// reporting a status (a kernel panic, for example).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var bins, env multi
	flag.Var(&bins, "bin", "host `file` to copy into the guest's $PATH (repeatable)")
	flag.Var(&env, "env", "`NAME=value` to export to the command (repeatable)")
	timeout := flag.Duration("timeout", 10*time.Minute, "kill the guest after this long")
	workdir := flag.String("workdir", "", "host `dir` copied to the command's working directory")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: vmrun [flags] -- <shell command>\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	files := map[string]string{}
	for _, b := range bins {
		files[filepath.Base(b)] = b
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	status, err := vm.Run(ctx, strings.Join(flag.Args(), " "), vm.Options{
		Timeout: *timeout, Files: files, Env: env, WorkDir: *workdir,
	})
	switch {
	case errors.Is(err, vm.ErrTimeout):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(124)
	case errors.Is(err, vm.ErrNoStatus):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(status)
}
