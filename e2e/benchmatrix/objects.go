package benchmatrix

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The benchmark cluster's shape. Every service is ClusterIP, one TCP port
// "http" 80 -> 8080, its endpoints ready on another node (NodeName), so no
// proxy has local endpoints to special-case.
const (
	Namespace  = "bench"
	NodeName   = "node-a"
	NodeIP     = "192.168.50.10"
	NodeCIDR   = "192.168.50.0/24"
	remoteNode = "node-b"
	portName   = "http"
	svcPort    = 80
	targetPort = 8080
)

// Address ranges: the loaded services' cluster IPs, their endpoints, the
// endpoints the scenarios add, the replacements of the 1% change, and the
// services the scenarios add.
var (
	vipBase     = netip.MustParseAddr("10.96.1.0")
	extraVIP    = netip.MustParseAddr("10.96.250.0")
	epBase      = netip.MustParseAddr("10.128.0.0")
	extraEPBase = netip.MustParseAddr("10.200.0.0")
	changedBase = netip.MustParseAddr("10.201.0.0")
)

// nth returns base + n (IPv4).
func nth(base netip.Addr, n int) netip.Addr {
	b := base.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ServiceName returns the name of loaded service i.
func ServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// VIP returns the cluster IP of loaded service i.
func VIP(i int) netip.Addr { return nth(vipBase, i) }

// EndpointIP returns endpoint j of loaded service i in a cluster of m
// endpoints per service.
func EndpointIP(i, j, m int) netip.Addr { return nth(epBase, i*m+j) }

// service returns a ClusterIP service.
func service(name string, vip netip.Addr) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP:  vip.String(),
			ClusterIPs: []string{vip.String()},
			Selector:   map[string]string{"app": name},
			Ports:      []corev1.ServicePort{{Name: portName, Protocol: corev1.ProtocolTCP, Port: svcPort, TargetPort: intstr.FromInt32(targetPort)}},
		},
	}
}

// slice returns the EndpointSlice of service name holding ips, ready, on
// the remote node.
func slice(name string, ips []netip.Addr) *discoveryv1.EndpointSlice {
	ready, port, proto, pn := true, int32(targetPort), corev1.ProtocolTCP, portName
	node := remoteNode
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name + "-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "proxysinks-bench"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Port: &port, Protocol: &proto}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
	}
	return s
}

// Writer returns a client for a kubeconfig without client-go's default
// rate limit (5 requests per second would make loading 10,000 services
// take over an hour and stretch the 1% change).
func Writer(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("benchmatrix: kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = 2000, 4000
	return kubernetes.NewForConfig(rc)
}

// Load creates the namespace and n services with m endpoints each (one
// EndpointSlice per service), with 16 writers; a write the apiserver
// answers with a timeout is tried again (createRetrying).
func Load(ctx context.Context, cs kubernetes.Interface, n, m int) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("benchmatrix: create namespace %s: %w", Namespace, err)
	}
	return parallel(n, 16, func(i int) error {
		name := ServiceName(i)
		ips := make([]netip.Addr, m)
		for j := range ips {
			ips[j] = EndpointIP(i, j, m)
		}
		err := createRetrying(ctx, "service "+name, func() error {
			_, err := cs.CoreV1().Services(Namespace).Create(ctx, service(name, VIP(i)), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		return createRetrying(ctx, "EndpointSlice of "+name, func() error {
			_, err := cs.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, slice(name, ips), metav1.CreateOptions{})
			return err
		})
	})
}

// parallel calls f(0..n-1) with w goroutines and returns the first error.
func parallel(n, w int, f func(int) error) error {
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	for range min(w, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// setEndpoints replaces the endpoints of service name's slice.
func setEndpoints(ctx context.Context, cs kubernetes.Interface, name string, ips []netip.Addr) error {
	cur, err := cs.DiscoveryV1().EndpointSlices(Namespace).Get(ctx, name+"-1", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("benchmatrix: get EndpointSlice of %s: %w", name, err)
	}
	next := slice(name, ips)
	next.ResourceVersion = cur.ResourceVersion
	if _, err := cs.DiscoveryV1().EndpointSlices(Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("benchmatrix: update EndpointSlice of %s: %w", name, err)
	}
	return nil
}

// kubeHash is kube-proxy's chain-name hash: the first 16 characters of
// base32(sha256(s)).
func kubeHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

// servicePortName is kube-proxy's name of service name's port.
func servicePortName(name string) string { return Namespace + "/" + name + ":" + portName }

// SEPChain returns the iptables chain of endpoint ep of service name (the
// name kube-proxy and the iptables sink both use).
func SEPChain(name string, ep netip.Addr) string {
	return sepChain(servicePortName(name), fmt.Sprintf("%s:%d", ep, targetPort))
}

// SVCChain returns the iptables service chain of service name.
func SVCChain(name string) string { return svcChain(servicePortName(name)) }

func sepChain(spn, endpoint string) string { return "KUBE-SEP-" + kubeHash(spn+"tcp"+endpoint) }

func svcChain(spn string) string { return "KUBE-SVC-" + kubeHash(spn+"tcp") }
