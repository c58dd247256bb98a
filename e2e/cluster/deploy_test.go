package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestDeployManifests renders every sink's overlay in deploy/ with kubectl's
// kustomize and has the real kube-apiserver validate it (server-side dry
// run, RBAC on): the DaemonSet, its ServiceAccount, ClusterRole and binding.
func TestDeployManifests(t *testing.T) {
	// Clusters that run kube-proxy allow privileged pods (kubeadm sets
	// --allow-privileged); the apiserver's default does not.
	c := Start(t, Options{NoEndpointSliceController: true, APIServerFlags: []string{"--allow-privileged=true"}})
	kubectl := filepath.Join(c.Bin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is built with the other pinned binaries: %v", err)
	}
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	overlays, _ := filepath.Glob(filepath.Join(root, "deploy", "*", "kustomization.yaml"))
	var sinks []string
	for _, o := range overlays {
		if dir := filepath.Base(filepath.Dir(o)); dir != "base" {
			sinks = append(sinks, dir)
		}
	}
	if mains, _ := filepath.Glob(filepath.Join(root, "sinks", "*", "main.go")); len(sinks) != len(mains) {
		t.Fatalf("overlays %v, want one per sink binary (%d)", sinks, len(mains))
	}
	for _, sink := range sinks {
		t.Run(sink, func(t *testing.T) {
			dir := filepath.Join(root, "deploy", sink)
			out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
			}
			kinds := map[string]int{}
			var image string
			for _, doc := range strings.Split(string(out), "\n---\n") {
				var obj struct {
					Kind string
					Spec struct {
						Template struct {
							Spec struct {
								Containers []struct{ Image string }
							}
						}
					}
				}
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatalf("rendered document: %v\n%s", err, doc)
				}
				kinds[obj.Kind]++
				if obj.Kind == "DaemonSet" {
					image = obj.Spec.Template.Spec.Containers[0].Image
				}
			}
			for _, k := range []string{"DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
				if kinds[k] != 1 {
					t.Errorf("rendered kinds %v: want one %s", kinds, k)
				}
			}
			if want := "proxysinks/" + sink + ":latest"; image != want {
				t.Errorf("image %q, want %q", image, want)
			}
			apply := exec.Command(kubectl, "--kubeconfig", c.AdminKubeconfig, "apply", "--dry-run=server", "-k", dir)
			if out, err := apply.CombinedOutput(); err != nil || !strings.Contains(string(out), "daemonset.apps/proxysinks created (server dry run)") {
				t.Errorf("kubectl apply --dry-run=server -k %s: %v\n%s", dir, err, out)
			}
		})
	}
}
