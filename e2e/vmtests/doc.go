// Package vmtests runs the project's real-kernel tests inside the test VM
// (package vm): TestKernelPackagesVM runs every kernel package's tests in
// one guest, and the node, differential and equivalence tests each boot
// their own and run a package's tests or a shell script there. `make test-vm` runs this package; the long
// tests (see longVM) run only with PROXYSINKS_VM_LONG=1 (`make test-long`).
//
// The functional tests are parallel (t.Parallel): each boots its own VM,
// with its own user-mode network, so nothing in a guest is shared, and a
// guest under TCG keeps about one host core busy, so two VMs at a time
// (go test's -parallel, GOMAXPROCS by default) keep both cores of a
// 2-core host busy.
// The benchmarks and the soak are not: they run alone, before the rest.
package vmtests
