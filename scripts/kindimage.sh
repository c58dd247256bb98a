#!/usr/bin/env bash
# Builds, without any image registry, every image a kind cluster and the
# Services conformance tests need, cached by version under $CACHE/kind:
#   - the component images, as OCI archives in $CACHE/kind/images/$KUBE_VERSION,
#     under the exact names kubeadm v1.37.2 and e2e.test v1.37.2 ask for:
#     kube-apiserver, kube-controller-manager, kube-scheduler (static
#     binaries), kube-proxy (built by scripts/kindbin.sh from
#     tools/kubebin/kubernetes, the e2e control plane's pin, with iptables,
#     nft and conntrack from Debian packages: the baseline of make kind-e2e
#     SINK=kube-proxy), etcd, coredns, pause (tools/kindbin/pause), agnhost (with the
#     tools the tests exec in it: sh, curl, wget, nc, nslookup, ip, socat from
#     Debian packages; GNU wget, not busybox's) and busybox (Debian's busybox-static);
#   - the node image, proxysinks/kind-node:$KUBE_VERSION-<stamp> in dockerd:
#     Debian bookworm from debootstrap with systemd, containerd, runc and the
#     CNI plugins (Debian packages), kubelet/kubeadm/kubectl v1.37.2, the
#     template of a bridge CNI configuration that scripts/kind-e2e.sh fills
#     per node (kindnetd is not available offline), runc-nocap as
#     containerd's runc, and the component images already in its containerd
#     (imported with the host's containerd into the image's /var/lib/containerd).
# Prints the node image's name last. Needs scripts/docker.sh to have run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/.cache}
GO=${GO:-go}
DOCKER=${DOCKER:-/usr/bin/docker}
KUBE_VERSION=v1.37.2
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KIND=$CACHE/kind
BIN=$KIND/bin/$KUBE_VERSION
IMAGES=$KIND/images/$KUBE_VERSION
KUBE_PROXY=$BIN/kube-proxy
NODE_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,nftables,conntrack,iproute2,ethtool,util-linux,mount,kmod,procps,ca-certificates,bash,libseccomp2,socat,jq,ebtables,ipset
# shellcheck source=scripts/oci.sh
. "$ROOT/scripts/oci.sh"

"$ROOT/scripts/kindbin.sh" kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler agnhost kube-proxy coredns pause etcd >&2

work=$(mktemp -d)
cleanup() {
	if [ -n "${ctrd_pid:-}" ]; then kill "$ctrd_pid" 2>/dev/null || true; wait "$ctrd_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# image NAME TAG ENTRYPOINT CMD: the archive $IMAGES/NAME.tar from $work/NAME,
# prepared by the caller; skipped when the archive exists.
minimal_root() {
	local r=$1
	mkdir -p "$r/tmp" "$r/etc" "$r/usr/local/bin" "$r/var/run"
	chmod 1777 "$r/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$r/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
	printf 'hosts: files dns\n' >"$r/etc/nsswitch.conf"
}
busybox_links() {
	# Every busybox applet the root does not have already, in /bin.
	local r=$1 a
	mkdir -p "$r/bin"
	cp /usr/bin/busybox "$r/bin/busybox"
	for a in $("$r/bin/busybox" --list); do
		[ -e "$r/bin/$a" ] || [ -e "$r/usr/bin/$a" ] || [ -e "$r/sbin/$a" ] || [ -e "$r/usr/sbin/$a" ] || ln -s busybox "$r/bin/$a"
	done
}
declare -A TAGS=(
	[kube-apiserver]=registry.k8s.io/kube-apiserver:$KUBE_VERSION
	[kube-controller-manager]=registry.k8s.io/kube-controller-manager:$KUBE_VERSION
	[kube-scheduler]=registry.k8s.io/kube-scheduler:$KUBE_VERSION
	[kube-proxy]=registry.k8s.io/kube-proxy:$KUBE_VERSION
	[etcd]=registry.k8s.io/etcd:3.7.0-0
	[coredns]=registry.k8s.io/coredns/coredns:v1.14.6
	[pause]=registry.k8s.io/pause:3.10.2
	[agnhost]=registry.k8s.io/e2e-test-images/agnhost:2.66.1
	[busybox]=registry.k8s.io/e2e-test-images/busybox:1.37.0-2
)
stamp=$(cat "$BIN/stamp" "$0" "$ROOT/scripts/oci.sh" | sha256sum | cut -c1-12)
if [ "$(cat "$IMAGES/stamp" 2>/dev/null)" != "$stamp" ]; then rm -rf "$IMAGES"; fi
mkdir -p "$IMAGES"
echo "$stamp" >"$IMAGES/stamp"
for name in "${!TAGS[@]}"; do
	out=$IMAGES/$name.tar
	[ -f "$out" ] && continue
	r=$work/$name
	minimal_root "$r"
	entry=null cmd=null
	case $name in
	kube-proxy)
		# What kube-proxy execs: iptables-{save,restore} (iptables mode), nft
		# (nftables mode), conntrack; the nf_tables variant of iptables, as the
		# sinks' images and the node use.
		deb_unpack "$KIND/debs" "$r" iptables nftables conntrack
		for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
			ln -sf xtables-nft-multi "$r/usr/sbin/$t"
		done
		rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/locale"
		cp "$KUBE_PROXY" "$r/usr/local/bin/"
		entry='["/usr/local/bin/kube-proxy"]' ;;
	kube-*|etcd)
		cp "$BIN/$name" "$r/usr/local/bin/"
		entry="[\"/usr/local/bin/$name\"]"
		mkdir -p "$r/var/lib/etcd" ;;
	coredns) cp "$BIN/coredns" "$r/coredns"; entry='["/coredns"]' ;;
	pause) cp "$BIN/pause" "$r/pause"; entry='["/pause"]' ;;
	agnhost)
		# GNU wget: Debian's busybox-static 1.35 wget crashes (SIGSEGV) on
		# -T, which the tests pass ("wget -q -O - -T 1 http://...").
		deb_unpack "$KIND/debs" "$r" bash curl wget netcat-openbsd iproute2 dnsutils socat
		# dpkg-deb -x runs no update-alternatives: nc is OpenBSD's, as upstream's.
		ln -s nc.openbsd "$r/bin/nc"
		# sh is bash: Debian's busybox sh runs its own applets (nc, wget)
		# before PATH, and busybox nc lacks the -v the tests pass.
		ln -s bash "$r/bin/sh"
		busybox_links "$r"
		cp "$BIN/agnhost" "$r/agnhost"
		ln -s agnhost "$r/agnhost-2"
		mkdir -p "$r/uploads"
		rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/locale"
		entry='["/agnhost"]' cmd='["pause"]' ;;
	busybox) busybox_links "$r"; cmd='["sh"]' ;;
	esac
	oci_archive "$r" "${TAGS[$name]}" "$entry" "$cmd" "$out.tmp"
	mv "$out.tmp" "$out"
	rm -rf "$r"
	echo "kindimage: $out (${TAGS[$name]}, $(du -h "$out" | cut -f1))" >&2
done

# The node's base system, cached by suite and package list.
base_stamp=$(echo "$SUITE $NODE_PACKAGES" | sha256sum | cut -c1-12)
base=$KIND/node/rootfs-$base_stamp
if [ ! -f "$base/.complete" ]; then
	echo "kindimage: debootstrap $SUITE into $base (a few minutes)" >&2
	rm -rf "$base.tmp"
	mkdir -p "$KIND/node"
	debootstrap --variant=minbase --include="$NODE_PACKAGES" "$SUITE" "$base.tmp" "$MIRROR" >"$KIND/node/debootstrap.log" 2>&1 ||
		{ tail -20 "$KIND/node/debootstrap.log" >&2; exit 1; }
	rm -rf "$base.tmp/var/cache/apt/archives/"*.deb "$base.tmp/var/lib/apt/lists/"*
	touch "$base.tmp/.complete"
	rm -rf "$base" && mv "$base.tmp" "$base"
fi

node_stamp=$(cat "$IMAGES/stamp" "$ROOT"/e2e/kind/node/* "$ROOT"/e2e/kind/runcnocap/*.go <(echo "$base_stamp") | sha256sum | cut -c1-12)
NODE=proxysinks/kind-node:$KUBE_VERSION-$node_stamp
if "$DOCKER" image inspect "$NODE" >/dev/null 2>&1; then
	echo "kindimage: ok ($NODE, images in $IMAGES)" >&2
	echo "$NODE"
	exit 0
fi

echo "kindimage: building $NODE" >&2
n=$work/node
cp -a "$base" "$n"
rm -f "$n/.complete"
node=$ROOT/e2e/kind/node
install -m 0755 "$BIN/kubelet" "$BIN/kubeadm" "$BIN/kubectl" "$n/usr/bin/"
CGO_ENABLED=0 "$GO" build -C "$ROOT" -ldflags "-s -w" -o "$n/usr/local/sbin/runc-nocap" ./e2e/kind/runcnocap
install -m 0755 "$node/entrypoint" "$n/usr/local/bin/entrypoint"
install -D -m 0644 "$node/containerd.toml" "$n/etc/containerd/config.toml"
# A template: no network until scripts/kind-e2e.sh writes the node's pod CIDR
# into /etc/cni/net.d (the node is NotReady, and no pod starts, until then).
install -D -m 0644 "$node/10-bridge.conflist" "$n/kind/10-bridge.conflist"
mkdir -p "$n/etc/cni/net.d"
install -D -m 0644 "$node/kubelet.service" "$n/etc/systemd/system/kubelet.service"
install -D -m 0644 "$node/kubelet.default" "$n/etc/default/kubelet"
mkdir -p "$n/kind" "$n/etc/kubernetes/manifests" "$n/etc/systemd/system/multi-user.target.wants"
echo "$KUBE_VERSION" >"$n/kind/version"
ln -sf /etc/systemd/system/kubelet.service "$n/etc/systemd/system/multi-user.target.wants/kubelet.service"
ln -sf /lib/systemd/system/containerd.service "$n/etc/systemd/system/multi-user.target.wants/containerd.service"
# What a container does not run: getty, udev, timers, the journal's kmsg reader.
rm -f "$n"/etc/systemd/system/getty.target.wants/* "$n"/etc/systemd/system/timers.target.wants/*
for u in systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service getty@tty1.service \
	systemd-binfmt.service systemd-networkd.service systemd-resolved.service systemd-timesyncd.service; do
	ln -sf /dev/null "$n/etc/systemd/system/$u"
done
echo "ReadKMsg=no" >>"$n/etc/systemd/journald.conf"
printf 'net.ipv4.ip_forward=1\nnet.bridge.bridge-nf-call-iptables=1\nnet.bridge.bridge-nf-call-ip6tables=1\n' >"$n/etc/sysctl.d/10-kind.conf"

# The component images, into the node's containerd (namespace k8s.io, the
# CRI's), by a containerd of the host's working on the node's /var/lib/containerd.
cat >"$work/ctrd.toml" <<-EOF
version = 2
root = "$n/var/lib/containerd"
state = "$work/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/ctrd.sock"
EOF
containerd --config "$work/ctrd.toml" >"$work/ctrd.log" 2>&1 &
ctrd_pid=$!
for _ in $(seq 30); do [ -S "$work/ctrd.sock" ] && break; sleep 0.5; done
for name in "${!TAGS[@]}"; do
	ctr -a "$work/ctrd.sock" -n k8s.io images import --no-unpack "$IMAGES/$name.tar" >/dev/null ||
		{ cat "$work/ctrd.log" >&2; exit 1; }
done
ctr -a "$work/ctrd.sock" -n k8s.io images ls -q >&2
kill "$ctrd_pid"; wait "$ctrd_pid" 2>/dev/null || true; ctrd_pid=

tar --numeric-owner -C "$n" -c . | "$DOCKER" import \
	-c 'ENV container=docker' -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$NODE-rootfs" >/dev/null
# docker import takes no STOPSIGNAL; systemd stops cleanly on SIGRTMIN+3.
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$NODE-rootfs" | "$DOCKER" build -q -t "$NODE" - >/dev/null
"$DOCKER" rmi "$NODE-rootfs" >/dev/null
echo "kindimage: built $NODE ($("$DOCKER" image inspect -f '{{.Size}}' "$NODE" | numfmt --to=iec))" >&2
echo "$NODE"
