#!/usr/bin/env bash
# Builds the Go binaries of the kind conformance kit from the Go module proxy,
# through the modules in tools/kindbin (outside go.work):
#   kind v0.33.0; Kubernetes v1.37.2's kubelet, kubeadm, kubectl,
#   kube-apiserver, kube-controller-manager, kube-scheduler, agnhost and the
#   e2e.test binary (go test -c k8s.io/kubernetes/test/e2e); CoreDNS at the
#   version kubeadm v1.37.2 deploys; a pause process; etcd (tools/kubebin/etcd)
#   and kube-proxy (tools/kubebin/kubernetes: the kube-proxy of the e2e
#   control plane's differentials, for the baseline image of make kind-e2e
#   SINK=kube-proxy), built here so that the kit needs nothing of make deps.
# Output: $CACHE/kind/bin/$KUBE_VERSION/. Cached by the modules' go.mod/go.sum:
# a second run with everything built prints one line. Static binaries
# (CGO_ENABLED=0): they run in the images, which carry no libc for them.
#
#   scripts/kindbin.sh            # everything
#   scripts/kindbin.sh kind       # only the kind CLI (the user path needs no more)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/.cache}
KUBE_VERSION=v1.37.2
GO=${GO:-go}
export CGO_ENABLED=0 GOWORK=off
BIN=$CACHE/kind/bin/$KUBE_VERSION
KUBE=(kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler agnhost)
ALL=(kind "${KUBE[@]}" kube-proxy e2e.test coredns pause etcd)
want=("${@:-${ALL[@]}}")

stamp=$(cat "$ROOT"/tools/kindbin/*/go.mod "$ROOT"/tools/kindbin/*/go.sum "$ROOT"/tools/kubebin/etcd/go.* "$ROOT"/tools/kubebin/kubernetes/go.* \
	"$ROOT"/tools/kindbin/pause/*.go 2>/dev/null | sha256sum | cut -c1-16)
if [ "$(cat "$BIN/stamp" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$BIN"
	mkdir -p "$BIN"
	echo "$stamp" >"$BIN/stamp"
fi
missing=()
for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
	echo "kindbin: ok (${want[*]} in $BIN)"
	exit 0
fi
has() { local x; for x in "${missing[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }

major=${KUBE_VERSION#v}; major=${major%%.*}
minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

start=$(date +%s)
echo "kindbin: building ${missing[*]} into $BIN (cold: up to an hour on a busy 2-core machine, e2e.test the longest)"
tmp=$BIN/tmp
mkdir -p "$tmp"
if has kind; then
	(cd "$ROOT/tools/kindbin/kind" && "$GO" build -ldflags "-s -w" -o "$tmp/kind" sigs.k8s.io/kind)
	mv "$tmp/kind" "$BIN/"
fi
if has pause; then
	(cd "$ROOT/tools/kindbin/pause" && "$GO" build -ldflags "-s -w" -o "$tmp/pause" .)
	mv "$tmp/pause" "$BIN/"
fi
pkgs=()
for b in "${KUBE[@]}"; do
	has "$b" || continue
	case $b in
	agnhost) pkgs+=(k8s.io/kubernetes/test/images/agnhost) ;;
	*) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
	esac
done
if [ ${#pkgs[@]} -gt 0 ]; then
	(cd "$ROOT/tools/kindbin/kubernetes" && "$GO" build -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
	for b in "${KUBE[@]}"; do if has "$b"; then mv "$tmp/$b" "$BIN/"; fi; done
fi
if has coredns; then
	(cd "$ROOT/tools/kindbin/coredns" && "$GO" build -ldflags "-s -w" -o "$tmp/coredns" github.com/coredns/coredns)
	mv "$tmp/coredns" "$BIN/"
fi
if has kube-proxy; then
	(cd "$ROOT/tools/kubebin/kubernetes" && "$GO" build -ldflags "$ldflags" -o "$tmp/kube-proxy" k8s.io/kubernetes/cmd/kube-proxy)
	mv "$tmp/kube-proxy" "$BIN/"
fi
if has etcd; then
	(cd "$ROOT/tools/kubebin/etcd" && "$GO" build -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
	mv "$tmp/etcd" "$BIN/"
fi
if has e2e.test; then
	(cd "$ROOT/tools/kindbin/kubernetes" && "$GO" test -c -vet=off -ldflags "$ldflags" -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e)
	mv "$tmp/e2e.test" "$BIN/"
fi
rmdir "$tmp"
for b in "${want[@]}"; do [ -x "$BIN/$b" ] || { echo "kindbin: $b not built" >&2; exit 1; }; done
echo "kindbin: built ${missing[*]} in $(($(date +%s) - start)) s"
