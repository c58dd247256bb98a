# proxysinks: see README.md. `make test` is the whole gate (CI runs it).
SHELL := /bin/bash
GO ?= go
# Everything static, without cgo: the VM's guests and the images need static
# binaries, and one setting for the host's tests, the builds and the guests'
# binaries means each package compiles once (from a cold Go cache the cgo
# and the static copies of the dependencies cost about 4 minutes more).
export CGO_ENABLED := 0
# No DWARF from the compiler: nothing here runs a debugger (stack traces and
# profiles use the symbol table, which stays), and from a cold Go cache it
# takes 12 to 19% off every compile (docs/build-times.md). Every go command
# make runs (scripts/kubebin.sh, the tests' own builds) gets the same flags,
# so the packages they share still compile once. -vet=off: go test's (and
# go test -c's) own subset of vet, which make test has run in full before
# (lint-vet); about 110 CPU seconds of a cold make test.
export GOFLAGS += -gcflags=all=-dwarf=false -vet=off
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The version the sink binaries report (--version, proxysinks_build_info).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/proxysinks/proxysinks/sinks/version.Version=$(VERSION) -X github.com/proxysinks/proxysinks/sinks/version.Commit=$(COMMIT)
# Packages whose tests boot the real-kernel VM.
VM_PKGS := ./e2e/vm/ ./e2e/vmtests/...

.PHONY: all deps deps-vm build image demo docs test test-unit test-vm test-long bench bench-report soak soak-vm lint lint-vet lint-staticcheck clean kind-deps kind-e2e kind-e2e-full

all: build

## deps: install what the tests need and is missing (apt packages, Debian's cloud kernel, the pinned Kubernetes binaries)
deps:
	@./scripts/deps.sh

## deps-vm: what the VM needs only (apt packages, Debian's cloud kernel), without building the Kubernetes binaries
deps-vm:
	@DEPS_KUBE=0 ./scripts/deps.sh

## build: every sink binary into bin/
build:
	@mkdir -p bin
	@mains=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./sinks/...); \
	if [ -n "$$mains" ]; then $(GO) build -ldflags "$(LDFLAGS)" -o bin/ $$mains && ls bin; else echo "build: no sink binaries yet"; fi

## image: one OCI image archive per sink into bin/images (no registry, no daemon; see scripts/image.sh)
image:
	@VERSION=$(VERSION) ./scripts/image.sh

## demo: the ipvs-fullstate sink: dry run here, then for real in the VM with traffic; ipvs-incremental's dry run
## compared (make deps-vm first: no Kubernetes binaries; the only compile is the two sinks, podserver, vmrun)
demo: deps-vm
	@./scripts/demo.sh

## docs: regenerate the pages generated from the code (docs/reference: flags, metrics, configuration fields); a test in make test fails when they differ
docs:
	$(GO) test -count=1 -run '^TestPages$$' ./sinks/refdocs/ -update

## test: everything but test-long: lint, build, unit and host-kernel tests (the scripts' commands checked
## against what make deps and kind-deps install: e2e/scripts), VM tests; staticcheck runs beside test-unit at a
## lower priority (scripts/beside.sh), in the CPU time test-unit leaves idle. The target: under 25 minutes from a
## cold Go cache on the 2-core build machine, met (docs/build-times.md: the runs, where the time goes; scripts/kubebin.sh
## compiles client-go and its dependencies once for the Kubernetes binaries and the tests)
test: deps build
	$(MAKE) lint-vet
	@./scripts/beside.sh "staticcheck" "$(MAKE) lint-staticcheck" -- env PROXYSINKS_REQUIRE_KUBE=1 $(MAKE) test-unit
	$(MAKE) test-vm

## test-unit: unit tests, host-kernel tests (root: fresh network namespaces) and the
## real control plane on loopback (e2e/cluster); VM tests skipped. -p 4: e2e/cluster and e2e/hostnode
## spend most of their 2.5 to 3 minutes waiting on control planes and timers, and at go test's default
## (one package per core) the two of them hold both slots while the other packages wait
## (docs/build-times.md)
test-unit:
	PROXYSINKS_SKIP_VM=1 $(GO) test -count=1 -p 4 -timeout 30m work

## test-vm: tests that boot the real-kernel VM (IPVS, dummy links, traffic), except the long ones
test-vm:
	PROXYSINKS_REQUIRE_VM=1 $(GO) test -count=1 -timeout 60m -v $(VM_PKGS)

## test-long: the tests test-unit and test-vm skip to keep make test under 25 minutes from a cold Go cache
## on the 2-core build machine. e2e/hostnode: the iptables and nftables kube-proxy differentials under
## each setting (about 3 minutes and 1.5 minutes), the nftables one after changes (about 1 minute), the
## nftables sink's whole traffic case table (about 75 s). e2e/vmtests: the kernel hostile suite for both
## IPVS sinks (about 5 minutes), both IPVS sinks' node cases against the real API (about 4 minutes each),
## nine node cases with --ipvs-vip-binding=routes (about 100 s), the IPVS kube-proxy differential on the
## hostile cluster and under each setting (15 to 30 minutes alone): 20 VM runs
test-long: deps
	PROXYSINKS_LONG=1 PROXYSINKS_REQUIRE_KUBE=1 $(GO) test -count=1 -timeout 20m -v -run '^(TestKubeProxySettingsDifferential|TestKubeProxyNFTablesSettingsDifferential|TestKubeProxyNFTablesChurnDifferential|TestNFTablesTraffic)$$' ./e2e/hostnode/
	PROXYSINKS_VM_LONG=1 PROXYSINKS_REQUIRE_VM=1 $(GO) test -count=1 -timeout 120m -v -run '^(TestHostileKernelVM|TestNodeE2EAPIVM|TestNodeE2ERoutesVM|TestKubeProxyHostileDifferentialVM|TestKubeProxySettingsDifferentialVM)$$' ./e2e/vmtests/

## bench: benchmarks (fakes and host kernel in a netns), then the VM benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem work
	PROXYSINKS_BENCH_VM=1 $(GO) test -count=1 -timeout 60m -v -run 'BenchVM' ./e2e/vmtests/

## bench-report: the scenario matrix (every sink and kube-proxy v1.37.2, real kernels, one apiserver) into
## bench/REPORT.md and bench/report/; SHORT=1 runs the short subset (1,000 x 10, each cell once, no strace: 13 minutes on the quiet 2-core build machine)
## (PROXYSINKS_BENCH_SIZES, _SINKS, _SCENARIOS select cells; PROXYSINKS_BENCH_SUPPLEMENT=1: a sinks-only run that replaces no kube-proxy row, see e2e/benchmatrix)
bench-report: deps
	PROXYSINKS_BENCH_MATRIX=1 $(GO) test -count=1 -timeout 0 -v $(if $(SHORT),-short) -run '^TestMatrix$$' ./e2e/benchmatrix/

## soak: 10 minutes (SOAK_DURATION) of churn at 10,000 services through both IPVS sinks on fake kernels; flat RSS and goroutines, kernels equal to a fresh sync
SOAK_DURATION ?= 10m
SOAK_INTERVAL ?= 10s
soak:
	SOAK_DURATION=$(SOAK_DURATION) SOAK_INTERVAL=$(SOAK_INTERVAL) $(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./bench/

## soak-vm: the soak on the real kernel in the VM: 3 minutes (SOAK_VM_DURATION) at 2,000 services (SOAK_VM_SERVICES) through both IPVS sinks
SOAK_VM_DURATION ?= 3m
SOAK_VM_SERVICES ?= 2000
soak-vm:
	PROXYSINKS_SOAK_VM=1 PROXYSINKS_REQUIRE_VM=1 SOAK_DURATION=$(SOAK_VM_DURATION) SOAK_SERVICES=$(SOAK_VM_SERVICES) $(GO) test -count=1 -timeout 0 -v -run '^TestSoakVM$$' ./e2e/vmtests/

## lint: gofmt, go vet, staticcheck
lint: lint-vet lint-staticcheck

## lint-vet: gofmt and go vet (make test runs them first: vet compiles what the tests compile; the go test runs make starts skip go test's own vet, GOFLAGS above)
lint-vet:
	@out=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' work)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet work

## lint-staticcheck: staticcheck (make test runs it beside test-unit, whose tests leave a core idle much of the time)
lint-staticcheck:
	$(GO) run $(STATICCHECK) work

## kind-deps: everything make kind-e2e needs (scripts/kinddeps.sh): Debian packages (docker.io, containerd, busybox-static, debootstrap), dockerd with the runc-nocap runtime, the kit's Go binaries, the offline images
kind-deps:
	@./scripts/kinddeps.sh

## kind-e2e: upstream's sig-network Services and Networking tests (not [Serial], [Slow], [Disruptive], [Flaky], [Feature:...]; FOCUS and SKIP
## change that) against SINK (default iptables; nftables, ipvs-fullstate, ipvs-incremental; kube-proxy with MODE=iptables|nftables|ipvs,
## the baseline) in a kind cluster of four nodes; offline unless KIND_OFFLINE=0; refreshes docs/kind-results.md (see e2e/README.md, "kind conformance")
kind-e2e:
	SINK=$${SINK:-iptables} ./scripts/kind-e2e.sh

## kind-e2e-full: the [Slow], [Serial] and [Disruptive] Services and Networking specs against SINK (none needs a cloud load balancer; the
## Disruptive ones restart the proxy's and the API server's pods, and the one that needs SSH skips itself), results in .cache/kind/results/<run>-full
kind-e2e-full:
	SINK=$${SINK:-iptables} SUITE=-full FOCUS='\[sig-network\] (Services|Networking).*(\[Slow\]|\[Serial\]|\[Disruptive\])' SKIP='\[Flaky\]|\[Feature:.+\]' ./scripts/kind-e2e.sh

## clean: remove binaries, VM images and the test cache (keeps the downloaded kernel)
clean:
	rm -rf bin .cache/vm
	$(GO) clean -testcache
