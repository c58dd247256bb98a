// Package benchmatrix is the scenario-matrix benchmark: every sink and
// kube-proxy v1.37.2 (ipvs, iptables and nftables modes) against the same
// real apiserver loaded with N services x M endpoints, on real kernels (the
// IPVS proxies in the VM, the iptables and nftables ones in a fresh network
// namespace of this host). For each proxy it measures, against the kernel
// (never the proxy's logs): the initial sync from empty, a restart with the
// cluster unchanged, one endpoint added and removed, one service added and
// removed, 1% of the services changed, and a steady window with nothing
// changed; each cell's wall time, CPU (the process and its waited children),
// peak RSS, bytes piped to iptables-restore, and syscalls (strace -c
// -f on one extra initial sync).
//
// `make bench-report` runs it (TestMatrix, PROXYSINKS_BENCH_MATRIX=1) and
// writes bench/REPORT.md with its PNG plots and bench/report/method.md
// (the machine, the method, each run's command) from every
// bench/report/results-*.json; `make bench-report SHORT=1` is the short
// subset. The report opens with a summary (summary.go): each sink's ratios
// against kube-proxy of its mode at the full matrix's sizes, and every
// target's outcome as the targets' sections state it. The hand-written
// bench/report/NOTES.md, linked from it, explains the runs and the missed
// targets. `PROXYSINKS_BENCH_RENDER=1 go test -run TestMatrixRender
// ./e2e/benchmatrix/` regenerates both pages from the results files alone
// (after adding one, for example); TestReportUpToDate fails while the
// checked-in pages differ from what the results give.
//
// PROXYSINKS_BENCH_SIZES, _SINKS and _SCENARIOS select the cells
// (TestMatrix's environment); PROXYSINKS_BENCH_SUPPLEMENT=1 marks a run of
// some sinks alone whose samples replace no other run's
// (Results.Supplement), such as the sinks' memory at sizes where
// kube-proxy's rows come from an older run. The driver (Driver) runs next
// to the kernel it measures: in this process for the host's namespaces, as
// TestMatrixGuest in the VM.
package benchmatrix
