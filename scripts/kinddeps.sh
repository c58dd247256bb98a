#!/usr/bin/env bash
# Installs everything the kind conformance kit (make kind-e2e) needs and is
# missing, idempotently (make kind-deps; scripts/kind-e2e.sh runs it first):
#   1. the Debian packages of PACKAGES (docker.io with containerd and ctr,
#      busybox-static for the check image and the test images, debootstrap for
#      the node image, git for the images' version), then a check that every
#      host command of COMMANDS is on PATH;
#   2. Docker usable for kind (scripts/docker.sh);
#   3. the kit's Go binaries (scripts/kindbin.sh; with KIND_OFFLINE=0 only
#      kind, kubectl and e2e.test);
#   4. offline (KIND_OFFLINE=1, the default) the component images and the
#      node image (scripts/kindimage.sh: debootstrap and apt-get download).
# A second run with everything present prints four lines.
#
# COMMANDS names every external command the kit's scripts run on the host
# with the package that installs it; e2e/scripts' TestInstalledCommands parses the
# scripts and fails when one runs a command COMMANDS does not name, or when a
# package here is neither installed by this script nor part of every Debian
# system (Priority: required).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIND_OFFLINE=${KIND_OFFLINE:-1}
PACKAGES=(docker.io containerd busybox-static debootstrap git)
# command:package. go is the repository's own prerequisite (every target needs it).
COMMANDS=(
	docker:docker.io dockerd:docker.io containerd:containerd ctr:containerd
	busybox:busybox-static debootstrap:debootstrap
	apt-get:apt apt-cache:apt dpkg-deb:dpkg dpkg-query:dpkg
	git:git bash:bash tar:tar grep:grep xargs:findutils
	cat:coreutils cp:coreutils cut:coreutils date:coreutils dirname:coreutils du:coreutils
	id:coreutils install:coreutils ln:coreutils ls:coreutils mkdir:coreutils mktemp:coreutils
	mv:coreutils nohup:coreutils numfmt:coreutils realpath:coreutils rm:coreutils rmdir:coreutils
	seq:coreutils sha256sum:coreutils sleep:coreutils stat:coreutils tail:coreutils touch:coreutils
	chmod:coreutils env:coreutils sort:coreutils basename:coreutils tr:coreutils uname:coreutils
	setsid:util-linux
	go:go
)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# Root: apt, and scripts/docker.sh configures and starts dockerd.
[ "$(id -u)" = 0 ] || { echo "kinddeps: run as root (apt-get, dockerd's configuration)" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
	echo "kinddeps: installing ${missing[*]} (apt)"
	if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then apt-get update -q >/dev/null; fi
	env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
absent=()
for c in "${COMMANDS[@]}"; do command -v "${c%%:*}" >/dev/null || absent+=("${c%%:*} (${c#*:})"); done
if [ ${#absent[@]} -gt 0 ]; then
	echo "kinddeps: missing after the install: ${absent[*]}" >&2
	exit 1
fi
echo "kinddeps: ok (${PACKAGES[*]}; ${#COMMANDS[@]} host commands on PATH)"

"$ROOT/scripts/docker.sh"
if [ "$KIND_OFFLINE" = 1 ]; then
	"$ROOT/scripts/kindbin.sh"
	"$ROOT/scripts/kindimage.sh" >/dev/null
else
	# kind's stock node image carries the node's binaries.
	"$ROOT/scripts/kindbin.sh" kind kubectl e2e.test
fi
