#!/usr/bin/env bash
# The kind conformance run of one sink, or of kube-proxy itself as the
# baseline (make kind-e2e SINK=... [MODE=...]):
#   1. a kind v0.33.0 cluster with kube-proxy disabled (kubeProxyMode: none),
#      a control plane and KIND_WORKERS (default 3: a spec needs three
#      schedulable nodes) workers: offline
#      (KIND_OFFLINE=1, the default) from the locally built node image
#      (scripts/kindimage.sh), whose bridge CNI configuration is written per
#      node here with the node's pod CIDR, with routes between the nodes' pod
#      CIDRs (what kindnetd does online); with registry access
#      (KIND_OFFLINE=0) kind's stock node image and kindnetd;
#   2. the sink's image (scripts/image.sh) loaded into the nodes (offline,
#      the node image holds kube-proxy's and the e2e test images);
#   3. kube-proxy's ConfigMap (kubeadm does not write it without kube-proxy)
#      and the sink from deploy/$SINK, or with SINK=kube-proxy kube-proxy
#      from e2e/kind/kube-proxy.yaml (kubeadm's addon) in MODE (iptables,
#      the default, or nftables; ipvs only where the host kernel has IPVS),
#      waited for until Ready;
#   4. e2e.test v1.37.2: FOCUS and SKIP (default: every [sig-network]
#      Services and Networking spec that is not [Serial], [Slow],
#      [Disruptive], [Flaky] or [Feature:...]; make kind-e2e-full runs the
#      [Slow], [Serial] and [Disruptive] ones, results in <run>$SUITE:
#      -full);
#   5. JUnit, the e2e log, the proxy's and the nodes' logs and each node's
#      `nft list ruleset` in $RESULTS; the cluster deleted (KIND_KEEP=1 keeps
#      it); docs/kind-results.md regenerated from every run's JUnit report in
#      $CACHE/kind/results (e2e/kind/results).
# Everything it needs is installed first by scripts/kinddeps.sh (make
# kind-deps), a no-op when it has run.
# Exit status: e2e.test's.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/.cache}
SINK=${SINK:?set SINK to iptables, nftables, ipvs-fullstate, ipvs-incremental or kube-proxy}
KIND_OFFLINE=${KIND_OFFLINE:-1}
KIND_WORKERS=${KIND_WORKERS:-3}
KUBE_VERSION=v1.37.2
BIN=$CACHE/kind/bin/$KUBE_VERSION
GO=${GO:-go}
VERSION=${VERSION:-$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo dev)}
FOCUS=${FOCUS:-'\[sig-network\] (Services|Networking)'}
SKIP=${SKIP:-'\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:.+\]|\[Slow\]'}
case $SINK in
iptables) MODE=iptables ;;
nftables) MODE=nftables ;;
ipvs-*) MODE=ipvs ;;
kube-proxy)
	MODE=${MODE:-iptables}
	case $MODE in iptables|nftables|ipvs) ;; *) echo "kind-e2e: MODE=$MODE: kube-proxy's modes are iptables, nftables and ipvs" >&2; exit 2 ;; esac ;;
*) echo "kind-e2e: unknown sink $SINK" >&2; exit 2 ;;
esac
if [ "$SINK" = kube-proxy ]; then
	RUN=kube-proxy-$MODE
	DAEMONSET=kube-proxy
else
	[ -d "$ROOT/deploy/$SINK" ] || { echo "kind-e2e: no deploy/$SINK" >&2; exit 2; }
	RUN=$SINK
	DAEMONSET=proxysinks
fi
CLUSTER=${KIND_CLUSTER:-proxysinks-$RUN}
# SUITE tells apart the results of another selection of specs (-full).
RESULTS=${RESULTS:-$CACHE/kind/results/$RUN${SUITE:-}}
# The kind nodes share this host's kernel: IPVS there or nowhere.
if [ "$MODE" = ipvs ] && [ ! -e /proc/net/ip_vs ] && ! grep -qs '/ip_vs\.ko' "/lib/modules/$(uname -r)/modules.dep"; then
	echo "kind-e2e: mode ipvs needs IPVS in the host's kernel (kind nodes share it), and kernel $(uname -r) has none" \
		"(no /proc/net/ip_vs, no ip_vs module in /lib/modules/$(uname -r)): run it on a host with IPVS" >&2
	exit 2
fi

# Debian's docker CLI first: kind runs "docker".
mkdir -p "$CACHE/kind/path"
ln -sf /usr/bin/docker "$CACHE/kind/path/docker"
export PATH=$CACHE/kind/path:$PATH
start=$(date +%s)
step() { echo "kind-e2e: [$(($(date +%s) - start)) s] $*"; }

KIND_OFFLINE=$KIND_OFFLINE "$ROOT/scripts/kinddeps.sh"
KIND=$BIN/kind
KUBECTL=$BIN/kubectl

cfg=$(mktemp -d)
trap 'rm -rf "$cfg"' EXIT
{
	echo "kind: Cluster"
	echo "apiVersion: kind.x-k8s.io/v1alpha4"
	echo "networking:"
	echo "  kubeProxyMode: none"
	if [ "$KIND_OFFLINE" = 1 ]; then echo "  disableDefaultCNI: true"; fi
	echo "nodes:"
	echo "  - role: control-plane"
	for _ in $(seq "$KIND_WORKERS"); do echo "  - role: worker"; done
	cat "$ROOT/e2e/kind/kubeadm-patches.yaml"
	# The offline node's entrypoint writes the pods' resolv.conf (see it).
	if [ "$KIND_OFFLINE" = 1 ]; then echo "    resolvConf: /kind/resolv.conf"; fi
} >"$cfg/cluster.yaml"

if [ "$KIND_OFFLINE" = 1 ]; then
	step "building the offline images"
	NODE_IMAGE=$("$ROOT/scripts/kindimage.sh")
else
	NODE_IMAGE=${KIND_NODE_IMAGE:-}
fi
if [ "$SINK" != kube-proxy ]; then
	step "building the $SINK image"
	OUT=$cfg/images SINKS=$SINK VERSION=$VERSION "$ROOT/scripts/image.sh"
fi

rm -rf "$RESULTS" && mkdir -p "$RESULTS"
cp "$cfg/cluster.yaml" "$RESULTS/"
"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
delete() {
	rc=$?
	"$KIND" export logs "$RESULTS/nodes" --name "$CLUSTER" >/dev/null 2>&1 || true
	if [ "${KIND_KEEP:-0}" != 1 ]; then "$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true; fi
	rm -rf "$cfg"
	exit $rc
}
trap delete EXIT
step "creating cluster $CLUSTER (${NODE_IMAGE:-the default node image of kind})"
"$KIND" create cluster --name "$CLUSTER" --config "$cfg/cluster.yaml" ${NODE_IMAGE:+--image "$NODE_IMAGE"} \
	--kubeconfig "$RESULTS/kubeconfig" --wait 0s
export KUBECONFIG=$RESULTS/kubeconfig

# A cluster IP on a port no Service has is routed off the node: to the
# Docker host and on. On machines whose network answers any TCP connection
# to port 80 (a transparent proxy), "the port stops forwarding" checks then
# see a connection succeed. Drop what is still addressed to the service
# range after the proxy's filter rules (priority filter + 10: a proxy's
# REJECT of a Service without endpoints comes first; DNATed traffic is
# addressed to its endpoint by then), so none of it leaves the node. Not
# an unreachable route: a route lookup fails before any hook, so a
# host-network client's connect to a served cluster IP failed with "no
# route to host" before the proxy's DNAT in OUTPUT, and a pod's packet to a
# Service without endpoints got the route's ICMP host unreachable before
# the proxy's REJECT in FORWARD (e2e/README.md, "kind conformance").
nodes=$("$KIND" get nodes --name "$CLUSTER")
for n in $nodes; do
	docker exec -i "$n" nft -f - <<-EOF
	table ip kind-servicenet {
	  chain forward {
	    type filter hook forward priority filter + 10; policy accept;
	    ip daddr 10.96.0.0/16 drop
	  }
	  chain output {
	    type filter hook output priority filter + 10; policy accept;
	    ip daddr 10.96.0.0/16 drop
	  }
	}
	EOF
done

# The offline pod network, what kindnetd does online: each node's bridge
# CNI configuration (the node image's template) with the pod CIDR
# kube-controller-manager gave the node; on every node a route to each other
# node's pod CIDR through that node; pod traffic leaving the pod network
# masqueraded (the bridge plugin's ipMasq would masquerade between nodes
# too, hiding the client pod's address). Until its configuration is there a
# node is NotReady and starts no pod.
podnet() {
	local n o cidr
	declare -A cidrs ips
	for n in $nodes; do
		cidr=
		for _ in $(seq 120); do
			cidr=$("$KUBECTL" get node "$n" -o 'jsonpath={.spec.podCIDR}' 2>/dev/null || true)
			[ -n "$cidr" ] && break
			sleep 1
		done
		[ -n "$cidr" ] || { echo "kind-e2e: node $n got no pod CIDR" >&2; return 1; }
		cidrs[$n]=$cidr
		ips[$n]=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$n")
	done
	for n in $nodes; do
		for o in $nodes; do
			if [ "$o" != "$n" ]; then docker exec "$n" ip route replace "${cidrs[$o]}" via "${ips[$o]}"; fi
		done
		docker exec -i "$n" nft -f - <<-EOF
		table ip kind-podnet {
		  chain postrouting {
		    type nat hook postrouting priority srcnat + 10; policy accept;
		    ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 masquerade
		  }
		}
		EOF
		docker exec "$n" sh -c "sed 's|POD_CIDR|${cidrs[$n]}|' /kind/10-bridge.conflist >/etc/cni/net.d/10-bridge.conflist"
		echo "kind-e2e: node $n (${ips[$n]}): pods in ${cidrs[$n]}"
	done
}
if [ "$KIND_OFFLINE" = 1 ]; then
	step "pod network"
	podnet
fi

if [ "$SINK" != kube-proxy ]; then
	step "loading images"
	"$KIND" load image-archive "$cfg/images/$SINK.tar" --name "$CLUSTER"
fi

# kube-proxy's ConfigMap, as kubeadm would write it, but with the API server's
# node address: the proxy runs on the host network before any Service works.
# maxPerCore 0 leaves nf_conntrack_max alone, as kind's configuration does
# (the host's global limit; read-only in a node's network namespace).
cp_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$CLUSTER-control-plane")
cat >"$cfg/config.conf" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: $MODE
clusterCIDR: 10.244.0.0/16
conntrack:
  maxPerCore: 0
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
EOF
cat >"$cfg/kubeconfig.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: https://$cp_ip:6443
contexts:
- name: default
  context: {cluster: default, namespace: default, user: default}
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
EOF
"$KUBECTL" -n kube-system create configmap kube-proxy --from-file="$cfg/config.conf" --from-file="$cfg/kubeconfig.conf"

if [ "$SINK" = kube-proxy ]; then
	step "deploying kube-proxy, mode $MODE"
	"$KUBECTL" apply -f "$ROOT/e2e/kind/kube-proxy.yaml"
else
	# The overlay with the image just loaded (a tag other than latest: never
	# pulled), its pods labelled k8s-app=kube-proxy as kubeadm's kube-proxy
	# is: upstream's "should work after restarting kube-proxy" restarts the
	# pods with that label (kind-e2e-full).
	mkdir -p "$CACHE/kind/deploy/$SINK"
	cat >"$CACHE/kind/deploy/$SINK/kustomization.yaml" <<-EOF
	apiVersion: kustomize.config.k8s.io/v1beta1
	kind: Kustomization
	resources:
	  - $(realpath --relative-to="$CACHE/kind/deploy/$SINK" "$ROOT/deploy/$SINK")
	images:
	  - name: proxysinks/$SINK
	    newTag: "$VERSION"
	labels:
	  - pairs: {k8s-app: kube-proxy}
	    includeSelectors: true
	EOF
	step "deploying $SINK"
	"$KUBECTL" apply -k "$CACHE/kind/deploy/$SINK"
fi
"$KUBECTL" -n kube-system rollout status "daemonset/$DAEMONSET" --timeout=5m
step "waiting for the nodes and kube-system"
"$KUBECTL" wait --for=condition=Ready nodes --all --timeout=5m
"$KUBECTL" -n kube-system wait --for=condition=Ready pods --all --timeout=5m

step "e2e.test: focus $FOCUS, skip $SKIP"
set +e
(cd "$RESULTS" && "$BIN/e2e.test" --kubeconfig="$KUBECONFIG" --provider=skeleton --kubectl-path="$KUBECTL" \
	--report-dir="$RESULTS" --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" \
	--ginkgo.timeout=2h --ginkgo.v --ginkgo.no-color ${E2E_ARGS:-} >"$RESULTS/e2e.log" 2>&1)
e2e_rc=$?
set -e
# Every node's proxy log (kubectl logs daemonset/... picks one pod).
for p in $("$KUBECTL" -n kube-system get pods -l k8s-app=kube-proxy -o 'jsonpath={range .items[*]}{.spec.nodeName}={.metadata.name} {end}'); do
	"$KUBECTL" -n kube-system logs "${p#*=}" --all-containers --tail=-1 >"$RESULTS/proxy-${p%%=*}.log" 2>&1 || true
done
# What the proxy left in each node's kernel (iptables-nft's rules included).
for n in $nodes; do
	docker exec "$n" nft list ruleset >"$RESULTS/ruleset-$n.nft" 2>&1 || true
done
grep -E '^(Ran|FAIL|PASS|SUCCESS|\[FAIL\])' "$RESULTS/e2e.log" | tail -30 || true
# The table of every run's results (docs/kind-results.md).
"$GO" run -C "$ROOT" ./e2e/kind/results -o docs/kind-results.md "$CACHE/kind/results" || true
step "done: e2e.test exit $e2e_rc; JUnit and logs in $RESULTS"
exit $e2e_rc
