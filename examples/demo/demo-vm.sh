# Sourced (". ./demo-vm.sh") by the guest shell, whose functions make ip and
# modprobe the real tools rather than busybox applets.
# Runs inside the test VM (make demo): a backend "pod" and a client "pod" as
# network namespaces routed through the node, the ipvs-fullstate sink on
# the node, and one request through the service's cluster IP.
set -e
pod() { # name index
	ip netns add "$1"
	ip link add "veth$2" type veth peer name eth0 netns "$1"
	ip addr add "10.244.$2.1/24" dev "veth$2"
	ip link set "veth$2" up
	ip netns exec "$1" ip addr add "10.244.$2.2/24" dev eth0
	ip netns exec "$1" ip link set eth0 up
	ip netns exec "$1" ip link set lo up
	ip netns exec "$1" ip route add default via "10.244.$2.1"
}
pod backend 1
pod client 2
ip netns exec backend podserver serve web-pod-1 8080 &
ipvs-fullstate --from-file cluster.yaml --node-name demo-node --node-address 10.244.2.1 \
	--min-sync-period 100ms --log-level warn &
sink=$!
i=0
until ipvsadm -Ln -t 10.96.0.10:80 2>/dev/null | grep -q 10.244.1.2; do
	i=$((i+1)); [ $i -lt 100 ] || { echo "the sink did not program the service"; exit 1; }
	sleep 0.2
done
echo; echo '$ ipvsadm -Ln'; ipvsadm -Ln
echo; echo '$ ipset list -n | grep KUBE'; ipset list -n | grep KUBE
echo; echo '$ ipset list KUBE-CLUSTER-IP (members)'; ipset list KUBE-CLUSTER-IP | sed -n '/Members/,$p'
echo; echo '$ ip -o addr show kube-ipvs0'; ip -o addr show kube-ipvs0 | awk '{print $2, $3, $4}'
echo; echo '$ iptables-save -t nat | grep KUBE'; iptables-save -t nat | grep -- '-A KUBE'
echo; echo '$ ip netns exec client podserver get tcp 10.96.0.10:80'
ip netns exec client podserver get tcp 10.96.0.10:80
echo; echo '$ ip netns exec client podserver get tcp 10.244.2.1:30080   # the NodePort'
ip netns exec client podserver get tcp 10.244.2.1:30080
kill $sink
