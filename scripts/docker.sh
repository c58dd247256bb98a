#!/usr/bin/env bash
# Makes Docker usable for kind on this machine, idempotently:
#   1. checks that Debian's docker.io and busybox-static (for the check image)
#      are installed (scripts/kinddeps.sh, make kind-deps, installs them);
#   2. installs runc-nocap (e2e/kind/runcnocap) as dockerd's default runtime:
#      this machine's capability bounding set lacks CAP_SYS_RESOURCE, so runc
#      fails every privileged container (kind's nodes) with "unable to apply
#      caps: operation not permitted" unless the OCI spec drops it;
#   3. starts dockerd when it is not running (no systemd here: in the
#      background, log in $DOCKERD_LOG);
#   4. checks it: a privileged container from a local busybox image runs.
# dockerd changes the host's iptables (DOCKER chains, FORWARD policy DROP) and
# sets net.ipv4.ip_forward=1; nothing else of the host's network is touched.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
WRAPPER=/usr/local/libexec/proxysinks/runc-nocap
DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/proxysinks-dockerd.log}
# Debian's CLI: a newer docker CLI earlier on PATH may not speak dockerd 20.10's API.
DOCKER=${DOCKER:-/usr/bin/docker}

if ! command -v dockerd >/dev/null || [ ! -x /usr/bin/docker ] || [ ! -x /usr/bin/busybox ]; then
	echo "docker: dockerd, /usr/bin/docker or /usr/bin/busybox missing: make kind-deps (scripts/kinddeps.sh) installs them" >&2
	exit 1
fi

# The wrapper, rebuilt when its source changes.
src_sum=$(cat "$ROOT"/e2e/kind/runcnocap/*.go | sha256sum | cut -c1-16)
if [ "$(cat "$WRAPPER.sum" 2>/dev/null)" != "$src_sum" ] || [ ! -x "$WRAPPER" ]; then
	mkdir -p "$(dirname "$WRAPPER")"
	(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -ldflags "-s -w" -o "$WRAPPER.tmp" ./e2e/kind/runcnocap)
	mv "$WRAPPER.tmp" "$WRAPPER"
	echo "$src_sum" >"$WRAPPER.sum"
	echo "docker: installed $WRAPPER"
fi

want='{"runtimes":{"runc-nocap":{"path":"'$WRAPPER'"}},"default-runtime":"runc-nocap"}'
restart=0
if [ ! -f "$DAEMON_JSON" ]; then
	mkdir -p "$(dirname "$DAEMON_JSON")"
	echo "$want" >"$DAEMON_JSON"
	restart=1
elif ! grep -q '"default-runtime": *"runc-nocap"' "$DAEMON_JSON"; then
	echo "docker: $DAEMON_JSON exists without runc-nocap as default runtime; add $want by hand" >&2
	exit 1
fi

running() { "$DOCKER" info >/dev/null 2>&1; }
if running && [ $restart = 1 ]; then
	echo "docker: dockerd runs without $DAEMON_JSON's runtime; restart it (it was not started by this script)" >&2
	exit 1
fi
if ! running; then
	echo "docker: starting dockerd (log: $DOCKERD_LOG)"
	setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
	for _ in $(seq 60); do running && break; sleep 1; done
	running || { echo "docker: dockerd did not come up; see $DOCKERD_LOG" >&2; tail -20 "$DOCKERD_LOG" >&2; exit 1; }
fi

# The check: a privileged container, as kind's nodes are.
if ! "$DOCKER" image inspect proxysinks/busybox:check >/dev/null 2>&1; then
	tmp=$(mktemp -d)
	mkdir -p "$tmp/bin"
	cp /usr/bin/busybox "$tmp/bin/busybox"
	ln -s busybox "$tmp/bin/sh"
	tar -C "$tmp" -c . | "$DOCKER" import -c 'CMD ["/bin/sh"]' - proxysinks/busybox:check >/dev/null
	rm -rf "$tmp"
fi
caps=$("$DOCKER" run --rm --privileged proxysinks/busybox:check /bin/busybox grep CapEff /proc/self/status) || {
	echo "docker: a privileged container does not run" >&2
	exit 1
}
echo "docker: ok ($("$DOCKER" version -f '{{.Server.Version}}'), runtime $("$DOCKER" info -f '{{.DefaultRuntime}}'), privileged container $caps)"
