package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// httpGet fetches http://addr/path. It dials on the calling goroutine, so
// that inside nstest's Do the socket belongs to the namespace (an
// http.Client dials on a goroutine of its own, on another thread).
func httpGet(addr, path string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

const nodeManifest = `apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {topology.kubernetes.io/zone: zone-a}`

// port is one service port: name, protocol, port, target port, node port.
type port struct {
	name, proto      string
	port, target, np int
}

// svc describes a Service for the manifests.
type svc struct {
	name        string
	typ         string // ClusterIP, NodePort, LoadBalancer, ExternalName
	clusterIP   string
	ports       []port
	externalIPs []string
	lbIP        string
	ranges      []string
	affinity    bool
	etpLocal    bool
	itpLocal    bool
	hcNodePort  int
}

func (s svc) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  type: %s\n", s.name, s.typ)
	if s.typ == "ExternalName" {
		fmt.Fprintf(&b, "  externalName: example.com\n")
	} else {
		fmt.Fprintf(&b, "  clusterIP: %s\n  clusterIPs: [%s]\n", s.clusterIP, s.clusterIP)
	}
	if len(s.externalIPs) > 0 {
		fmt.Fprintf(&b, "  externalIPs: [%s]\n", strings.Join(s.externalIPs, ", "))
	}
	if s.affinity {
		b.WriteString("  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}\n")
	}
	if s.etpLocal {
		b.WriteString("  externalTrafficPolicy: Local\n")
		if s.hcNodePort > 0 {
			fmt.Fprintf(&b, "  healthCheckNodePort: %d\n", s.hcNodePort)
		}
	}
	if s.itpLocal {
		b.WriteString("  internalTrafficPolicy: Local\n")
	}
	if len(s.ranges) > 0 {
		fmt.Fprintf(&b, "  loadBalancerSourceRanges: [%s]\n", strings.Join(s.ranges, ", "))
	}
	b.WriteString("  ports:\n")
	for _, p := range s.ports {
		fmt.Fprintf(&b, "  - {name: %s, protocol: %s, port: %d, targetPort: %d", p.name, p.proto, p.port, p.target)
		if p.np > 0 {
			fmt.Fprintf(&b, ", nodePort: %d", p.np)
		}
		b.WriteString("}\n")
	}
	if s.lbIP != "" {
		fmt.Fprintf(&b, "status:\n  loadBalancer:\n    ingress: [{ip: %s}]\n", s.lbIP)
	}
	return b.String()
}

// ep is one endpoint of a slice.
type ep struct {
	ip          string
	node        string
	ready       bool
	terminating bool
}

// slice returns an EndpointSlice for service name with the ports' target
// ports.
// withTrigger sets an EndpointSlice's last-change-trigger-time annotation.
func withTrigger(slice string, t time.Time) string {
	return strings.Replace(slice, "metadata:\n", fmt.Sprintf("metadata:\n  annotations: {endpoints.kubernetes.io/last-change-trigger-time: %q}\n", t.UTC().Format(time.RFC3339Nano)), 1)
}

func slice(service string, ports []port, eps ...ep) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-slice\n  namespace: default\n  labels: {kubernetes.io/service-name: %s}\naddressType: IPv4\nports:\n", service, service)
	for _, p := range ports {
		fmt.Fprintf(&b, "- {name: %s, protocol: %s, port: %d}\n", p.name, p.proto, p.target)
	}
	b.WriteString("endpoints:\n")
	for _, e := range eps {
		node := e.node
		if node == "" {
			node = "node-1"
		}
		fmt.Fprintf(&b, "- addresses: [%s]\n  nodeName: %s\n  conditions: {ready: %v, serving: true, terminating: %v}\n", e.ip, node, e.ready, e.terminating)
	}
	return b.String()
}
