#!/usr/bin/env bash
# Builds one OCI image per sink, without a registry, a daemon or privileges:
#   - the sink, built static (CGO_ENABLED=0, as the VM tests build, so the
#     build cache is shared) and stripped, as /usr/local/bin/<sink>;
#   - the userspace tools the sinks exec (iptables-{nft,legacy}-{save,restore},
#     modprobe) with their libraries, unpacked from Debian's packages
#     (apt-get download + dpkg-deb -x; the dependency closure of iptables and
#     kmod, cached in $CACHE/image/debs);
#   - one uncompressed layer, deterministic (sorted, mtime 0, uid/gid 0).
# Each image is written as a tar holding both an OCI image layout (index.json,
# blobs/) and Docker's manifest.json, so `docker load`, `podman load`,
# `ctr images import` and `kind load image-archive` all take it.
#
#   scripts/image.sh                    # every sink under sinks/, into bin/images
#   SINKS=ipvs-fullstate OUT=/tmp/img scripts/image.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$top/.cache}
OUT=${OUT:-$top/bin/images}
GO=${GO:-go}
VERSION=${VERSION:-$(git -C "$top" describe --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git -C "$top" rev-parse HEAD 2>/dev/null || true)}
REPO=${REPO:-proxysinks}
PACKAGES=(iptables kmod)

cd "$top"
# shellcheck source=scripts/oci.sh
. "$top/scripts/oci.sh"
if [ -z "${SINKS:-}" ]; then
	SINKS=$($GO list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./sinks/... | xargs -n1 basename | tr '\n' ' ')
fi
[ -n "$SINKS" ] || { echo "image: no sink binaries" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Debian packages, resolved once per package list and cached.
debs=$CACHE/image/debs
base=$work/base
deb_unpack "$debs" "$base" "${PACKAGES[@]}"
# What the image does not need: documentation, manuals, locales, iconv
# modules, init scripts.
rm -rf "$base/usr/share/doc" "$base/usr/share/man" "$base/usr/share/locale" "$base/usr/share/lintian" \
	"$base/usr/share/bug" "$base/etc/init.d" "$base/etc/rc"*.d "$base/usr/lib/x86_64-linux-gnu/gconv"
# dpkg-deb -x does not run update-alternatives: point the plain names at the
# nf_tables variant, as Debian's default alternative does.
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf "xtables-nft-multi" "$base/usr/sbin/$t"
done
mkdir -p "$base/tmp" "$base/run" "$base/lib/modules" "$base/etc"
chmod 1777 "$base/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\n' >"$base/etc/passwd"
printf 'root:x:0:\n' >"$base/etc/group"

for sink in $SINKS; do
	root=$work/$sink
	cp -a "$base" "$root"
	mkdir -p "$root/usr/local/bin"
	CGO_ENABLED=0 $GO build -ldflags="-s -w -X github.com/proxysinks/proxysinks/sinks/version.Version=$VERSION -X github.com/proxysinks/proxysinks/sinks/version.Commit=$COMMIT" -o "$root/usr/local/bin/$sink" "./sinks/$sink"

	tag=$REPO/$sink:$VERSION
	oci_archive "$root" "$tag" "[\"/usr/local/bin/$sink\"]" null "$OUT/$sink.tar"
	echo "image: $OUT/$sink.tar ($tag, $(du -h "$OUT/$sink.tar" | cut -f1))"
done
