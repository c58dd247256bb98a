package xtables

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs a command with stdin and returns its standard output. Tests run
// it inside a network namespace; Exec runs it directly.
type Runner func(name string, args []string, stdin []byte) ([]byte, error)

// Exec runs commands on the host.
func Exec(name string, args []string, stdin []byte) ([]byte, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ExecWith returns a Runner that runs each command through do, which calls
// its function in the place the commands must run in: a network
// namespace's Do (netlinkraw/nstest) in the kernel tests.
func ExecWith(do func(func() error) error) Runner {
	return func(name string, args []string, stdin []byte) ([]byte, error) {
		var out []byte
		err := do(func() error {
			var err error
			out, err = Exec(name, args, stdin)
			return err
		})
		return out, err
	}
}
