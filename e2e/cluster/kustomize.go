package cluster

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize renders a kustomization directory as `kubectl kustomize` and
// `kubectl apply -k` do, with kustomize's own library (krusty, the one
// inside kubectl, at kubectl v1.37.2's version) and its default options,
// and returns the documents as YAML separated by "---" lines.
func Kustomize(dir string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("cluster: kustomize %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("cluster: kustomize %s: render: %w", dir, err)
	}
	return out, nil
}
