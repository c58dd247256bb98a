package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestDeployManifests renders every sink's overlay in deploy/ with
// kustomize (Kustomize: kubectl kustomize's library) and has the real
// kube-apiserver validate each object, as `kubectl apply --dry-run=server
// -k` does (a create with dryRun=All, RBAC on): the DaemonSet, its
// ServiceAccount, ClusterRole and binding.
func TestDeployManifests(t *testing.T) {
	// Clusters that run kube-proxy allow privileged pods (kubeadm sets
	// --allow-privileged); the apiserver's default does not.
	c := Start(t, Options{NoEndpointSliceController: true, APIServerFlags: []string{"--allow-privileged=true"}})
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
	create := dryRunCreator(t, c.AdminKubeconfig)
	for _, sink := range sinks {
		t.Run(sink, func(t *testing.T) {
			dir := filepath.Join(root, "deploy", sink)
			out, err := Kustomize(dir)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			var image string
			for _, doc := range strings.Split(string(out), "\n---\n") {
				var obj unstructured.Unstructured
				if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
					t.Fatalf("rendered document: %v\n%s", err, doc)
				}
				kinds[obj.GetKind()]++
				if obj.GetKind() == "DaemonSet" {
					containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
					if len(containers) > 0 {
						image, _, _ = unstructured.NestedString(containers[0].(map[string]any), "image")
					}
				}
				if err := create(&obj); err != nil {
					t.Errorf("server dry run of %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
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
		})
	}
}

// dryRunCreator returns a function that creates an object through the
// apiserver of kubeconfig with dryRun=All, as `kubectl apply
// --dry-run=server` does for an object that does not exist yet: the
// apiserver validates and admits it, and stores nothing. A namespaced
// object without a namespace goes to "default", as with kubectl.
func dryRunCreator(t *testing.T, kubeconfig string) func(*unstructured.Unstructured) error {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return func(obj *unstructured.Unstructured) error {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		got, err := ri.Create(context.Background(), obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if got.GetName() != obj.GetName() {
			return fmt.Errorf("the dry run answered with %s, want %s", got.GetName(), obj.GetName())
		}
		return nil
	}
}
