package ipvssinktest

// InputRulesWant are lines an IPVS sink's dry run on
// sinktest.InputRules must print: the good external IP and the legacy one
// read as decimal, the mapped range as its IPv4 range on the IPv4-only
// load balancer, the terminating endpoint without a serving condition as
// the fallback, the IPv6 endpoint beside a skipped mapped one.
var InputRulesWant = []string{
	"ipset add KUBE-EXTERNAL-IP 192.0.2.50,tcp:80",
	"ipset add KUBE-EXTERNAL-IP 192.0.2.52,tcp:80",
	"ipset add KUBE-LOAD-BALANCER-FW 198.51.100.6,tcp:80",
	"ipset add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.6,tcp:80,10.0.0.0/8",
	"ipset add KUBE-LOAD-BALANCER 198.51.100.4,tcp:80",
	"ipset add KUBE-6-LOAD-BALANCER 2001:db8:2::1,tcp:80",
	"ipvs create destination 10.244.1.7:8080 on TCP/10.96.0.31:80 weight 1",
	"ipvs create destination [fd00:244::5]:8080 on TCP/[2001:db8:2::1]:80 weight 1",
}

// InputRulesNot are what no line of that dry run may hold: a firewall
// entry of the load balancer whose IPv4 ranges include 0.0.0.0/0 or of an
// IPv6 side without ranges, a zero-length range, the IPv6 external IP of
// an IPv4-only service, the unknown-ipMode ingress, the mapped IPv6
// endpoint, an invalid prefix.
var InputRulesNot = []string{
	"KUBE-LOAD-BALANCER-FW 198.51.100.4",
	"KUBE-6-LOAD-BALANCER-FW",
	"/0",
	"2001:db8::50",
	"198.51.100.5",
	"10.244.1.6",
	"invalid",
}
