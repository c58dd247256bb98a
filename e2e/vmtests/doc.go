// Package vmtests runs the project's real-kernel tests inside the test VM:
// each test here boots the VM (package vm) and runs a package's kernel tests
// or a shell script there. `make test-vm` runs this package; the long
// tests (see longVM) run only with PROXYSINKS_VM_LONG=1 (`make test-long`).
package vmtests
