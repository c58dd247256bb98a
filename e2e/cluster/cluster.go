// Package cluster runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver (RBAC, token authentication, a self-signed serving
// certificate, dual-stack service CIDRs, on loopback) and upstream's
// EndpointSlice controller (endpointslice-controller: the controller of
// kube-controller-manager's --controllers=endpointslice-controller, alone),
// so that EndpointSlices are written by the real controller from Pod
// objects. There
// is no kubelet: tests create Nodes and Pods and set the Pods' status
// themselves (Ready, NotReady, terminating).
//
// The binaries are the pinned ones scripts/kubebin.sh builds into
// .cache/kube/<version>/bin (make deps). Every component logs to a file;
// the files go to the test output when the test fails.
package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// KubeVersion and EtcdVersion are the pinned versions scripts/kubebin.sh
// builds.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.7.3"
)

// ServiceCIDRs are the apiserver's service cluster IP ranges (dual stack).
const ServiceCIDRs = "10.96.0.0/16,fd00:96::/112"

// RequireEnv set to 1 makes a test fail, instead of skip, when the
// binaries are missing (make test sets it after make deps built them).
const RequireEnv = "PROXYSINKS_REQUIRE_KUBE"

// binaries are the programs the package runs, in BinDir.
var binaries = []string{"etcd", "kube-apiserver", "endpointslice-controller", "kube-proxy"}

// BinDir returns the directory of the pinned binaries: $PROXYSINKS_KUBE_BIN,
// or .cache/kube/<KubeVersion>/bin under the VM cache directory.
func BinDir() (string, error) {
	if d := os.Getenv("PROXYSINKS_KUBE_BIN"); d != "" {
		return d, nil
	}
	cache, err := vm.DefaultCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "kube", KubeVersion, "bin"), nil
}

// Require returns the binaries' directory, or skips the test naming what is
// missing; it fails instead when RequireEnv, vm.RequireEnv or CI is set.
func Require(t testing.TB) string {
	t.Helper()
	dir, err := BinDir()
	if err == nil {
		for _, b := range binaries {
			if _, err = exec.LookPath(filepath.Join(dir, b)); err != nil {
				break
			}
		}
	}
	if err != nil {
		msg := fmt.Sprintf("cluster: Kubernetes %s binaries missing (run make deps or scripts/kubebin.sh): %v", KubeVersion, err)
		if os.Getenv(RequireEnv) == "1" || os.Getenv(vm.RequireEnv) == "1" || os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// Options configures a control plane. The zero value is usable.
type Options struct {
	// APIServerFlags are extra kube-apiserver flags (for example
	// --min-request-timeout=5 to make watches expire quickly).
	APIServerFlags []string
	// NoEndpointSliceController leaves the EndpointSlice controller off
	// (tests that write EndpointSlices themselves).
	NoEndpointSliceController bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir holds the certificates, kubeconfigs, etcd data and logs.
	Dir string
	// Bin is the binaries' directory.
	Bin string
	// APIPort is the apiserver's port on 127.0.0.1.
	APIPort int
	// CA is the PEM certificate of the apiserver's self-signed serving
	// certificate (valid for 127.0.0.1 and GuestAPIAddr's IP).
	CA []byte
	// AdminToken authenticates as a member of system:masters.
	AdminToken string
	// AdminKubeconfig is the path of a kubeconfig for AdminToken.
	AdminKubeconfig string
	// Client (its Admin authenticating with AdminToken) creates and
	// changes the cluster's objects.
	*Client

	t        testing.TB
	opt      Options
	etcdPort int
	etcd     *process
	api      *process
	slices   *process // the EndpointSlice controller
	spawner  *spawner
}

// Client creates and changes a control plane's objects in place of the
// components a test cluster does not run (kubelet, the serviceaccount
// controller). It works on any apiserver its Admin may write to: a test in
// the VM uses one on the host's control plane through the VM's NIC.
type Client struct {
	// Admin is a client allowed everything.
	Admin kubernetes.Interface
}

// NewClient returns a Client for the kubeconfig file at path.
func NewClient(path string) (*Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("cluster: kubeconfig %s: %w", path, err)
	}
	// Tests create and delete objects in bursts: client-go's default of
	// 5 requests a second would be the slowest part.
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: client for %s: %w", path, err)
	}
	return &Client{Admin: cs}, nil
}

// GuestAPIAddr is where a VM with a NIC (vm.NIC) reaches the apiserver.
const GuestAPIAddr = "10.0.2.100:6443"

// Start starts etcd, kube-apiserver and (unless disabled) the
// EndpointSlice controller, waits until the apiserver is ready and the
// default namespace has its default ServiceAccount, and stops everything
// when the test ends.
func Start(t testing.TB, opt Options) *Cluster {
	t.Helper()
	c := &Cluster{Bin: Require(t), Dir: t.TempDir(), t: t, opt: opt, Client: &Client{}, spawner: newSpawner()}
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	c.etcdPort, c.APIPort = ports[0], ports[2]
	if c.CA, err = writePKI(c.Dir); err != nil {
		t.Fatal(err)
	}
	c.AdminToken = randomToken()
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", c.AdminToken)
	if err := os.WriteFile(filepath.Join(c.Dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := os.WriteFile(c.AdminKubeconfig, c.Kubeconfig(c.Server(), c.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)

	c.etcd = c.start("etcd",
		"--name=e2e", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-cluster=e2e=http://127.0.0.1:%d", ports[1]),
		"--unsafe-no-fsync", "--log-level=warn",
	)
	c.StartAPIServer()
	if c.Client, err = NewClient(c.AdminKubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The apiserver creates the default namespace itself; the ServiceAccount
	// admission needs its default ServiceAccount, which the (absent)
	// serviceaccount controller would create.
	if err := poll(ctx, func() (bool, error) {
		_, err := c.Admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		c.t.Fatalf("cluster: namespace default never appeared: %v", err)
	}
	if err := c.CreateNamespace(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	// The apiserver's own controller creates the default ServiceCIDR
	// (from --service-cluster-ip-range) after /readyz answers. A proxy
	// started before it is Ready syncs without the service CIDRs, and
	// adds kube-proxy's drop of unallocated ClusterIPs only later: a
	// differential on a loaded machine once compared kube-proxy's rules
	// before it came. Tests start where a real cluster is: with it Ready.
	if err := poll(ctx, func() (bool, error) {
		sc, err := c.Admin.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady), nil
	}); err != nil {
		c.t.Fatalf("cluster: the default ServiceCIDR never became Ready: %v", err)
	}
	if !opt.NoEndpointSliceController {
		// kube-controller-manager's settings for the controller (no leader
		// election and no serving port: the program has neither).
		c.slices = c.start("endpointslice-controller",
			"--kubeconfig="+c.AdminKubeconfig,
			"--concurrent-service-endpoint-syncs=5",
			"--max-endpoints-per-slice=100",
		)
	}
	return c
}

// Server returns the apiserver's URL on loopback.
func (c *Cluster) Server() string { return fmt.Sprintf("https://127.0.0.1:%d", c.APIPort) }

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the
// same port and data, and waits until it is ready.
func (c *Cluster) StartAPIServer() {
	c.t.Helper()
	args := []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.etcdPort),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.APIPort),
		"--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + filepath.Join(c.Dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(c.Dir, "serving.key"),
		"--token-auth-file=" + filepath.Join(c.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(c.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(c.Dir, "sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDRs,
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	c.api = c.start("kube-apiserver", append(args, c.opt.APIServerFlags...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		c.t.Fatalf("cluster: kube-apiserver not ready: %v", err)
	}
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 20 s).
func (c *Cluster) StopAPIServer() {
	c.t.Helper()
	c.api.stop()
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// port and data with flags as its extra flags (in place of
// Options.APIServerFlags), for example a feature gate switched off.
func (c *Cluster) RestartAPIServer(flags ...string) {
	c.t.Helper()
	c.StopAPIServer()
	c.opt.APIServerFlags = flags
	c.StartAPIServer()
}

// waitReady polls /readyz until it answers 200.
func (c *Cluster) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	var last string
	err := poll(ctx, func() (bool, error) {
		if c.api.exited() {
			return false, errors.New("kube-apiserver exited")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Server()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last answer: %s)", err, last)
	}
	return nil
}

// Kubeconfig returns a kubeconfig for server authenticating with token and
// trusting the cluster's CA.
func (c *Cluster) Kubeconfig(server, token string) []byte {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: e2e
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
`, server, base64(c.CA), token)
	return []byte(cfg)
}

// CreateNamespace creates a namespace (if missing) and its default
// ServiceAccount (Pods need it; the serviceaccount controller is not run).
func (c *Client) CreateNamespace(ctx context.Context, name string) error {
	_, err := c.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster: create namespace %s: %w", name, err)
	}
	_, err = c.Admin.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster: create ServiceAccount %s/default: %w", name, err)
	}
	return nil
}

// stop stops the components in reverse order and, when the test failed,
// writes their logs to the test output. The EndpointSlice controller must
// exit 0 on SIGTERM.
func (c *Cluster) stop() {
	var early []string
	for _, p := range []*process{c.slices, c.api, c.etcd} {
		if p == nil {
			continue
		}
		if p.exited() {
			early = append(early, fmt.Sprintf("%s exited before the cluster stopped: %v", p.name, p.err))
		} else if p.stop(); p == c.slices && p.err != nil {
			c.t.Errorf("cluster: %s did not exit cleanly on SIGTERM: %v (log %s)", p.name, p.err, p.log)
		}
	}
	c.spawner.close()
	for _, e := range early {
		c.t.Logf("cluster: %s", e)
	}
	if c.t.Failed() {
		for _, p := range []*process{c.etcd, c.api, c.slices} {
			if p != nil {
				c.t.Logf("cluster: log of %s (%s):\n%s", p.name, p.log, tail(p.log, 150))
			}
		}
	}
}

// process is one running component.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how it exited, once done is closed
}

// start starts a component with its output in <Dir>/<name>.log (appended
// across restarts).
func (c *Cluster) start(name string, args ...string) *process {
	c.t.Helper()
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(f, "=== %s %s\n", name, strings.Join(args, " "))
	cmd := exec.Command(filepath.Join(c.Bin, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.spawner.start(cmd); err != nil {
		f.Close()
		c.t.Fatalf("cluster: start %s: %v", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) stop() {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = append([][]byte{[]byte(fmt.Sprintf("[... %d lines before]", len(lines)-n))}, lines[len(lines)-n:]...)
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (the other test
// processes on the machine pick theirs the same way).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: pick a free port: %w", err)
		}
		ls = append(ls, l)
		_, p, _ := net.SplitHostPort(l.Addr().String())
		port, _ := strconv.Atoi(p)
		ports = append(ports, port)
	}
	return ports, nil
}

// poll calls f every 100ms until it returns true or an error, or ctx ends.
func poll(ctx context.Context, f func() (bool, error)) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
