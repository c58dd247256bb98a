package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// RBACFile returns the path of the RBAC manifest the sinks ship,
// deploy/base/rbac.yaml at the workspace root.
func RBACFile() (string, error) {
	root, err := vm.WorkspaceRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "base", "rbac.yaml"), nil
}

// ApplyRBAC creates or replaces the ServiceAccounts, ClusterRoles and
// ClusterRoleBindings of a manifest (documents separated by ---). It
// returns the first ServiceAccount's namespace and name.
func (c *Client) ApplyRBAC(ctx context.Context, file string) (namespace, name string, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("cluster: read RBAC manifest: %w", err)
	}
	for i, doc := range strings.Split(string(b), "\n---") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return "", "", fmt.Errorf("cluster: %s document %d: %w", file, i+1, err)
		}
		switch tm.Kind {
		case "ServiceAccount":
			var o corev1.ServiceAccount
			if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				return "", "", fmt.Errorf("cluster: %s document %d: %w", file, i+1, err)
			}
			if name == "" {
				namespace, name = o.Namespace, o.Name
			}
			_, err = c.Admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case "ClusterRole":
			var o rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				return "", "", fmt.Errorf("cluster: %s document %d: %w", file, i+1, err)
			}
			_, err = c.Admin.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				var cur *rbacv1.ClusterRole
				if cur, err = c.Admin.RbacV1().ClusterRoles().Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
					cur.Rules = o.Rules
					_, err = c.Admin.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{})
				}
			}
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				return "", "", fmt.Errorf("cluster: %s document %d: %w", file, i+1, err)
			}
			_, err = c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case "":
			continue // a comment-only document
		default:
			return "", "", fmt.Errorf("cluster: %s document %d: unexpected kind %q", file, i+1, tm.Kind)
		}
		if err != nil {
			return "", "", fmt.Errorf("cluster: apply %s document %d (%s): %w", file, i+1, tm.Kind, err)
		}
	}
	if name == "" {
		return "", "", fmt.Errorf("cluster: %s has no ServiceAccount", file)
	}
	return namespace, name, nil
}

// ServiceAccountToken returns a token (valid for a day) of the
// ServiceAccount namespace/name, from the TokenRequest API.
func (c *Client) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	exp := int64(24 * 3600)
	tr, err := c.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("cluster: token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// SinkKubeconfig applies the shipped RBAC manifest (RBACFile) and writes
// into the cluster's directory a kubeconfig for server (Server(), or
// "https://"+GuestAPIAddr from a VM) with a token of its ServiceAccount. It
// returns the file's path.
func (c *Cluster) SinkKubeconfig(ctx context.Context, server string) (string, error) {
	file, err := RBACFile()
	if err != nil {
		return "", err
	}
	return c.KubeconfigFor(ctx, file, server)
}

// KubeconfigFor is SinkKubeconfig with another RBAC manifest.
func (c *Cluster) KubeconfigFor(ctx context.Context, rbacFile, server string) (string, error) {
	ns, name, err := c.ApplyRBAC(ctx, rbacFile)
	if err != nil {
		return "", err
	}
	token, err := c.ServiceAccountToken(ctx, ns, name)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.Dir, name+"-*.kubeconfig")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(c.Kubeconfig(server, token)); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// CreateNode creates a Node with the zone label (when not empty) and the
// given InternalIP addresses in its status (kube-proxy waits for them).
func (c *Client) CreateNode(ctx context.Context, name, zone string, addrs ...string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if zone != "" {
		n.Labels["topology.kubernetes.io/zone"] = zone
	}
	n, err := c.Admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster: create node %s: %w", name, err)
	}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "E2E", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster: set status of node %s: %w", name, err)
	}
	return nil
}

// SetPodCIDRs sets the Node's spec.podCIDRs (and spec.podCIDR, the
// first), as a node IPAM controller does.
func (c *Client) SetPodCIDRs(ctx context.Context, name string, cidrs ...string) error {
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cluster: get node %s: %w", name, err)
	}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	if _, err := c.Admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster: set the pod CIDRs of node %s: %w", name, err)
	}
	return nil
}

// Pod describes a pod the tests create in place of a kubelet's.
type Pod struct {
	Namespace, Name string
	// Node is spec.nodeName.
	Node string
	// IPs are status.podIPs (one per family).
	IPs []string
	// Labels select the pod into services.
	Labels map[string]string
	// Ports are the container's ports (named target ports resolve here).
	Ports []corev1.ContainerPort
	// NotReady sets the Ready condition False.
	NotReady bool
}

// CreatePod creates the pod (one container, never started) and sets its
// status as a kubelet would: Running, its IPs, Ready or not.
func (c *Client) CreatePod(ctx context.Context, p Pod) error {
	grace := int64(3600) // a graceful delete stays terminating: no kubelet finishes it
	o := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels},
		Spec: corev1.PodSpec{
			NodeName:                      p.Node,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "app", Image: "proxysinks.invalid/none", Ports: p.Ports}},
		},
	}
	o, err := c.Admin.CoreV1().Pods(p.Namespace).Create(ctx, o, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster: create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	o.Status.Phase = corev1.PodRunning
	for _, ip := range p.IPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("cluster: pod %s/%s: bad IP %q", p.Namespace, p.Name, ip)
		}
		o.Status.PodIPs = append(o.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(p.IPs) > 0 {
		o.Status.PodIP = p.IPs[0]
	}
	setReady(o, !p.NotReady)
	if _, err := c.Admin.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster: set status of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// SetPodReady sets a pod's Ready and ContainersReady conditions.
func (c *Client) SetPodReady(ctx context.Context, namespace, name string, ready bool) error {
	o, err := c.Admin.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cluster: get pod %s/%s: %w", namespace, name, err)
	}
	setReady(o, ready)
	if _, err := c.Admin.CoreV1().Pods(namespace).UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster: set readiness of pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

func setReady(o *corev1.Pod, ready bool) {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	o.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now},
	}
}

// TerminatePod deletes a pod gracefully: with no kubelet to finish the
// deletion it stays terminating (its endpoints terminating) until DeletePod.
func (c *Client) TerminatePod(ctx context.Context, namespace, name string) error {
	if err := c.Admin.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("cluster: terminate pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// DeletePod deletes a pod at once (grace period 0).
func (c *Client) DeletePod(ctx context.Context, namespace, name string) error {
	zero := int64(0)
	if err := c.Admin.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("cluster: delete pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// WaitSlices polls the EndpointSlices of a service until cond holds, for
// at most a minute.
func (c *Client) WaitSlices(ctx context.Context, namespace, service string, cond func([]discoveryv1.EndpointSlice) bool) ([]discoveryv1.EndpointSlice, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last []discoveryv1.EndpointSlice
	err := poll(ctx, func() (bool, error) {
		l, err := c.Admin.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, nil // the apiserver may be restarting
		}
		last = l.Items
		return cond(last), nil
	})
	if err != nil {
		return last, fmt.Errorf("cluster: EndpointSlices of %s/%s: %w (last seen: %d slices)", namespace, service, err, len(last))
	}
	return last, nil
}

// ReadyAddresses returns the addresses of the ready endpoints in slices,
// "ip" or "ip(terminating)" for serving terminating ones, in slice order.
func ReadyAddresses(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, e := range s.Endpoints {
			switch {
			case e.Conditions.Ready != nil && *e.Conditions.Ready:
				out = append(out, e.Addresses...)
			case e.Conditions.Terminating != nil && *e.Conditions.Terminating && e.Conditions.Serving != nil && *e.Conditions.Serving:
				for _, a := range e.Addresses {
					out = append(out, a+"(terminating)")
				}
			}
		}
	}
	return out
}
