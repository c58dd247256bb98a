#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries the e2e control plane and the
# kube-proxy differential run: etcd, kube-apiserver, kube-proxy and
# endpointslice-controller (tools/kubebin/kubernetes/endpointslice-controller:
# upstream's EndpointSlice controller alone, the one controller the tests
# need, in place of kube-controller-manager and its 343 packages more), from
# the Go module proxy, through the modules in tools/kubebin (outside go.work,
# so the sinks' dependencies do not move).
# Output: $CACHE/kube/$KUBE_VERSION/bin/. Cached by version, by the modules'
# go.mod and go.sum, their Go sources and BINARIES: a second run with
# everything built prints one line.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/.cache}
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
GO=${GO:-go}
# Static binaries: kube-proxy also runs in the VM, which has no libc for Go programs.
export CGO_ENABLED=0
DEST=$CACHE/kube/$KUBE_VERSION
BIN=$DEST/bin
BINARIES=(etcd kube-apiserver kube-proxy endpointslice-controller)

# The stamp records what the binaries were built from.
stamp=$( (echo "${BINARIES[*]}"; cd "$ROOT/tools/kubebin" && find . -name go.mod -o -name go.sum -o -name '*.go' | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16)
complete() {
	[ "$(cat "$DEST/stamp" 2>/dev/null)" = "$stamp" ] || return 1
	for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}
if complete; then
	echo "kubebin: ok ($KUBE_VERSION, etcd $ETCD_VERSION in $BIN)"
	exit 0
fi

major=${KUBE_VERSION#v}; major=${major%%.*}
minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

tmp=$DEST/bin.tmp
rm -rf "$tmp" && mkdir -p "$tmp"
start=$(date +%s)
echo "kubebin: building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION into $BIN (cold: about 10 min on 2 cores)"
(cd "$ROOT/tools/kubebin/etcd" && GOWORK=off "$GO" build -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
# One go build for the three: the packages they share compile once.
(cd "$ROOT/tools/kubebin/kubernetes" && GOWORK=off "$GO" build -ldflags "$ldflags" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-proxy ./endpointslice-controller)
for b in "${BINARIES[@]}"; do [ -x "$tmp/$b" ] || { echo "kubebin: $b not built" >&2; exit 1; }; done
rm -rf "$BIN" && mv "$tmp" "$BIN"
echo "$stamp" > "$DEST/stamp"
echo "kubebin: built in $(($(date +%s) - start)) s: $("$BIN/kube-proxy" --version)"
