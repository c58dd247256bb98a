package nft

import (
	"fmt"
	"os/exec"
	"strings"
)

// runStdin runs a command with stdin, failing with its output.
func runStdin(name, stdin string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}
