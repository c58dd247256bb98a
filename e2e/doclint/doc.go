// Package doclint holds the test that keeps the repository's READMEs
// reference pages rather than notebooks: README.md and every module README
// (every README.md outside .cache/, bin/ and testdata/) stays within
// 150 lines and carries no benchmark run label (the <label> of each
// bench/report/results-<label>.json, read when the test runs, so a new run
// is covered), no calendar date (YYYY-MM-DD) and no time of day with a time
// zone (HH:MM, optionally :SS, followed by UTC, Z, +01:00 and the like).
// Measurements and their dates live in bench/REPORT.md and docs/.
//
// Run it with `go test ./e2e/doclint/` (it is part of make test); a failure
// names the file, the line and the offending text.
package doclint
