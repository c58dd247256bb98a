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
