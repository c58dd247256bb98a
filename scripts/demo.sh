#!/usr/bin/env bash
# make demo: the ipvs-fullstate sink's dry run on this host, then the sink for
# real in the test VM with a backend pod, a client pod and one request; then
# the ipvs-incremental sink's dry run, compared with the first (the same
# kernel operations). One VM boot: the node tests (make test-vm) run both
# sinks in the VM.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# What the demo runs and nothing more, in one go build (the packages they
# share compile once, the links run side by side): the two sinks, the
# guest's pod server and the VM runner. No Kubernetes binaries (make deps-vm).
CGO_ENABLED=0 go build -o bin/ ./sinks/ipvs-fullstate ./sinks/ipvs-incremental ./e2e/cmd/podserver ./e2e/cmd/vmrun
dry=(--dry-run --from-file examples/demo/cluster.yaml --node-name demo-node --node-address 10.244.2.1
	--metrics-bind-address= --healthz-bind-address= --log-level warn)
echo "== dry run on the host (no privileges, no IPVS): the kernel operations for examples/demo"
echo '$ ipvs-fullstate --dry-run --from-file examples/demo/cluster.yaml --node-name demo-node --node-address 10.244.2.1'
bin/ipvs-fullstate "${dry[@]}" | tee bin/demo-fullstate.dryrun
echo
echo "== the same sink in the test VM (Debian's kernel under qemu)"
bin/vmrun -bin bin/ipvs-fullstate -bin bin/podserver -workdir examples/demo -timeout 5m -- . ./demo-vm.sh
echo
echo "== the incremental sink's dry run: the same kernel operations"
echo '$ ipvs-incremental --dry-run ... | diff - <(ipvs-fullstate --dry-run ...)'
bin/ipvs-incremental "${dry[@]}" | diff - bin/demo-fullstate.dryrun && echo "identical ($(wc -l <bin/demo-fullstate.dryrun) operations)"
