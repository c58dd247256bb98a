// Command results writes docs/kind-results.md, the table of the kind
// conformance runs (make kind-e2e), from their JUnit reports: every
// directory under the results root with a junit_01.xml is a run, named
// after the directory (the sink, or kube-proxy-<mode> for the baseline).
//
//	go run ./e2e/kind/results -o docs/kind-results.md .cache/kind/results
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("o", "", "the Markdown file to write (default: standard output)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: results [-o FILE] RESULTS-DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out); err != nil {
		fmt.Fprintln(os.Stderr, "results:", err)
		os.Exit(1)
	}
}

// run reads every run under root and writes the page to out.
func run(root, out string) error {
	reports, err := filepath.Glob(filepath.Join(root, "*", "junit_01.xml"))
	if err != nil {
		return fmt.Errorf("list the runs in %s: %w", root, err)
	}
	if len(reports) == 0 {
		return fmt.Errorf("no run in %s (no */junit_01.xml)", root)
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	runs := make([]Run, 0, len(reports))
	for _, rep := range reports {
		r, err := ReadRun(filepath.Dir(rep))
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(wd, r.Report); err == nil && filepath.IsLocal(rel) {
			r.Report = rel
		}
		runs = append(runs, r)
	}
	page := Render(runs)
	if out == "" {
		_, err := os.Stdout.WriteString(page)
		return err
	}
	if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
