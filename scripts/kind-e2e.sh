#!/usr/bin/env bash
# The kind conformance run of one sink (make kind-e2e SINK=...):
#   1. a kind v0.33.0 cluster with kube-proxy disabled (kubeProxyMode: none):
#      offline (KIND_OFFLINE=1, the default) one node from the locally built
#      node image (scripts/kindimage.sh) with a bridge CNI; with registry
#      access (KIND_OFFLINE=0) kind's stock node image, kindnetd and
#      KIND_WORKERS (default 2) workers;
#   2. the sink's image (scripts/image.sh) and, offline, the e2e test images
#      loaded into the nodes;
#   3. kube-proxy's ConfigMap (kubeadm does not write it without kube-proxy)
#      and the sink from deploy/$SINK, waited for until Ready;
#   4. e2e.test v1.37.2 with the sig-network Services conformance focus;
#   5. JUnit, the e2e log, the sink's and the nodes' logs and each node's
#      `nft list ruleset` in $RESULTS; the cluster deleted (KIND_KEEP=1 keeps
#      it).
# Everything it needs is installed first by scripts/kinddeps.sh (make
# kind-deps), a no-op when it has run.
# Exit status: e2e.test's.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/.cache}
SINK=${SINK:?set SINK to iptables, nftables, ipvs-fullstate or ipvs-incremental}
KIND_OFFLINE=${KIND_OFFLINE:-1}
KIND_WORKERS=${KIND_WORKERS:-2}
CLUSTER=${KIND_CLUSTER:-proxysinks-$SINK}
KUBE_VERSION=v1.37.2
BIN=$CACHE/kind/bin/$KUBE_VERSION
RESULTS=${RESULTS:-$CACHE/kind/results/$SINK}
VERSION=${VERSION:-$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo dev)}
FOCUS=${FOCUS:-'\[sig-network\] Services.*\[Conformance\]'}
SKIP=${SKIP:-'\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:.+\]|\[Slow\]'}
case $SINK in iptables) MODE=iptables ;; nftables) MODE=nftables ;; ipvs-*) MODE=ipvs ;; *) echo "kind-e2e: unknown sink $SINK" >&2; exit 2 ;; esac
[ -d "$ROOT/deploy/$SINK" ] || { echo "kind-e2e: no deploy/$SINK" >&2; exit 2; }

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
	if [ "$KIND_OFFLINE" != 1 ]; then for _ in $(seq "$KIND_WORKERS"); do echo "  - role: worker"; done; fi
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
step "building the $SINK image"
OUT=$cfg/images SINKS=$SINK VERSION=$VERSION "$ROOT/scripts/image.sh"

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
# see a connection succeed. Make the service range unreachable past the
# sink's rules, as it is in a real cluster network (DNAT happens before
# routing, so served ports are not affected).
for n in $("$KIND" get nodes --name "$CLUSTER"); do
	docker exec "$n" ip route replace unreachable 10.96.0.0/16
done

step "loading images"
"$KIND" load image-archive "$cfg/images/$SINK.tar" --name "$CLUSTER"

# kube-proxy's ConfigMap, as kubeadm would write it, but with the API server's
# node address: the sink runs on the host network before any Service works.
cp_ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$CLUSTER-control-plane")
cat >"$cfg/config.conf" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: $MODE
clusterCIDR: 10.244.0.0/16
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

# The overlay with the image just loaded (a tag other than latest: never pulled).
mkdir -p "$CACHE/kind/deploy/$SINK"
cat >"$CACHE/kind/deploy/$SINK/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$CACHE/kind/deploy/$SINK" "$ROOT/deploy/$SINK")
images:
  - name: proxysinks/$SINK
    newTag: "$VERSION"
EOF
step "deploying $SINK"
"$KUBECTL" apply -k "$CACHE/kind/deploy/$SINK"
"$KUBECTL" -n kube-system rollout status daemonset/proxysinks --timeout=5m
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
"$KUBECTL" -n kube-system logs daemonset/proxysinks --all-containers --tail=-1 >"$RESULTS/sink.log" 2>&1 || true
# What the sink left in each node's kernel (iptables-nft's rules included).
for n in $("$KIND" get nodes --name "$CLUSTER"); do
	docker exec "$n" nft list ruleset >"$RESULTS/ruleset-$n.nft" 2>&1 || true
done
grep -E '^(Ran|FAIL|PASS|SUCCESS|\[FAIL\])' "$RESULTS/e2e.log" | tail -30 || true
step "done: e2e.test exit $e2e_rc; JUnit and logs in $RESULTS"
exit $e2e_rc
