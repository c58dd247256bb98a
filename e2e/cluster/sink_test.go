package cluster_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestSinkDryRunBeforeAPIServer runs the ipvs-fullstate binary in
// --dry-run with the shipped ServiceAccount's kubeconfig, started while the
// apiserver is down: once it is up, the sink prints the kernel operations
// for the real EndpointSlices and exits.
func TestSinkDryRunBeforeAPIServer(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	bin := vm.BuildSink(t, "ipvs-fullstate")
	ctx := ctxFor(t, 3*time.Minute)
	must(t, c.CreateNode(ctx, "node-a", "", "192.168.50.10"))
	must(t, c.CreateNode(ctx, "node-b", "", "192.168.50.11"))
	_, err := c.Admin.CoreV1().Services("default").Create(ctx, webService("web", "10.96.1.1"), metav1.CreateOptions{})
	must(t, err)
	must(t, c.CreatePod(ctx, webPod("web", "a", "node-a", "10.244.0.1", false)))
	must(t, c.CreatePod(ctx, webPod("web", "b", "node-b", "10.244.1.1", true)))
	_, err = c.WaitSlices(ctx, "default", "web", func(s []discoveryv1.EndpointSlice) bool { return len(cluster.ReadyAddresses(s)) == 1 })
	must(t, err)
	kc, err := c.SinkKubeconfig(ctx, c.Server())
	must(t, err)

	c.StopAPIServer()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--dry-run", "--kubeconfig", kc, "--node-name", "node-a", "--node-address", "192.168.50.10")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the sink exited without an apiserver (%v):\n%s\n%s", err, stdout.String(), stderr.String())
	case <-time.After(5 * time.Second):
	}
	c.StartAPIServer()
	if err := <-exited; err != nil {
		t.Fatalf("ipvs-fullstate --dry-run: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"ipvs create service TCP/10.96.1.1:80 scheduler rr",
		"ipvs create destination 10.244.0.1:8080",
		"ipset add KUBE-CLUSTER-IP 10.96.1.1,tcp:80",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q", want)
		}
	}
	if strings.Contains(out, "10.244.1.1") {
		t.Errorf("dry-run output has the not-ready endpoint 10.244.1.1")
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
}
