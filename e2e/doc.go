// Package e2e holds the real-kernel tests: the VM harness (package vm), the
// node-level traffic tests and the kind conformance kit.
package e2e
