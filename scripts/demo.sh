#!/usr/bin/env bash
# make demo: the ipvs-fullstate sink's dry run on this host, then the sink for
# real in the test VM with a backend pod, a client pod and one request.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
CGO_ENABLED=0 go build -o bin/ipvs-fullstate ./sinks/ipvs-fullstate
CGO_ENABLED=0 go build -o bin/podserver ./e2e/cmd/podserver
echo "== dry run on the host (no privileges, no IPVS): the kernel operations for examples/demo"
echo '$ ipvs-fullstate --dry-run --from-file examples/demo/cluster.yaml --node-name demo-node --node-address 10.244.2.1'
bin/ipvs-fullstate --dry-run --from-file examples/demo/cluster.yaml --node-name demo-node --node-address 10.244.2.1 \
	--metrics-bind-address= --healthz-bind-address= --log-level warn
echo
echo "== the same sink in the test VM (Debian's kernel under qemu)"
go run ./e2e/cmd/vmrun -bin bin/ipvs-fullstate -bin bin/podserver -workdir examples/demo -timeout 5m -- . ./demo-vm.sh
