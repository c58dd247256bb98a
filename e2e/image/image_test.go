// Package image tests the sink images that `make image` (scripts/image.sh)
// builds: the archive is a valid OCI layout with Docker's manifest.json
// beside it, every blob matches its digest, and the binaries in the image
// run from its own root: the sink's dry run, and the iptables and modprobe
// tools the sinks exec, against a fresh network namespace's kernel.
package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type manifest struct {
	Config descriptor   `json:"config"`
	Layers []descriptor `json:"layers"`
}

type config struct {
	Config struct {
		Entrypoint []string `json:"Entrypoint"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func top(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the repository: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// readArchive returns every regular file of a tar archive by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
}

// blob returns the blob of a digest, checking that its content matches.
func blob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	hexsum, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", digest)
	}
	b, ok := files["blobs/sha256/"+hexsum]
	if !ok {
		t.Fatalf("blob %s missing", digest)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexsum {
		t.Fatalf("blob %s has digest sha256:%x", digest, sum)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// run runs a command of the image in a fresh network namespace, with the
// image's root as its root.
func run(root string, args ...string) (string, error) {
	cmd := exec.Command("unshare", append([]string{"--net", "chroot", root}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestImage(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the image's binaries run under chroot in a fresh network namespace")
	}
	for _, tool := range []string{"apt-get", "dpkg-deb", "unshare", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (make deps)", tool)
		}
	}
	repo := top(t)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(repo, "scripts", "image.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out, "VERSION=test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, b)
	}
	archives, _ := filepath.Glob(filepath.Join(out, "*.tar"))
	if len(archives) == 0 {
		t.Fatal("no image written")
	}
	for _, archive := range archives {
		sink := strings.TrimSuffix(filepath.Base(archive), ".tar")
		t.Run(sink, func(t *testing.T) {
			files := readArchive(t, archive)
			if got := strings.TrimSpace(string(files["oci-layout"])); got != `{"imageLayoutVersion":"1.0.0"}` {
				t.Errorf("oci-layout = %q", got)
			}
			var index struct{ Manifests []descriptor }
			decode(t, files["index.json"], &index)
			if len(index.Manifests) != 1 {
				t.Fatalf("index.json lists %d manifests, want 1", len(index.Manifests))
			}
			if got, want := index.Manifests[0].Annotations["io.containerd.image.name"], "docker.io/proxysinks/"+sink+":test"; got != want {
				t.Errorf("image name %q, want %q", got, want)
			}
			var m manifest
			decode(t, blob(t, files, index.Manifests[0].Digest), &m)
			var c config
			decode(t, blob(t, files, m.Config.Digest), &c)
			if len(m.Layers) != 1 || len(c.RootFS.DiffIDs) != 1 || c.RootFS.DiffIDs[0] != m.Layers[0].Digest {
				t.Fatalf("layers %+v, diff_ids %v: want one uncompressed layer", m.Layers, c.RootFS.DiffIDs)
			}
			layer := blob(t, files, m.Layers[0].Digest)
			if int64(len(layer)) != m.Layers[0].Size {
				t.Errorf("layer size %d, manifest says %d", len(layer), m.Layers[0].Size)
			}
			if !slices.Equal(c.Config.Entrypoint, []string{"/usr/local/bin/" + sink}) {
				t.Errorf("entrypoint %v", c.Config.Entrypoint)
			}
			var docker []dockerManifest
			decode(t, files["manifest.json"], &docker)
			want := []dockerManifest{{Config: "blobs/sha256/" + strings.TrimPrefix(m.Config.Digest, "sha256:"),
				RepoTags: []string{"proxysinks/" + sink + ":test"}, Layers: []string{"blobs/sha256/" + strings.TrimPrefix(m.Layers[0].Digest, "sha256:")}}}
			if fmt.Sprint(docker) != fmt.Sprint(want) {
				t.Errorf("manifest.json %+v, want %+v", docker, want)
			}

			root := t.TempDir()
			untar := exec.Command("tar", "-x", "-C", root)
			untar.Stdin = strings.NewReader(string(layer))
			if b, err := untar.CombinedOutput(); err != nil {
				t.Fatalf("unpack the layer: %v\n%s", err, b)
			}
			checkTools(t, root)
			checkDryRun(t, repo, root, sink)
		})
	}
}

// checkTools runs, from the image, the tools the sinks exec: both iptables
// back ends with the extensions the sinks' rules use, and modprobe.
func checkTools(t *testing.T, root string) {
	const script = "*nat\n:KUBE-TEST - [0:0]\n-A KUBE-TEST -m comment --comment \"image test\" -m addrtype --dst-type LOCAL -j MARK --or-mark 0x4000\n-A KUBE-TEST -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully\nCOMMIT\n"
	for _, backend := range []string{"nft", "legacy"} {
		cmd := exec.Command("unshare", "--net", "sh", "-c",
			fmt.Sprintf("chroot %s iptables-%s-restore --noflush && chroot %s iptables-%s-save -t nat", root, backend, root, backend))
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), `-A KUBE-TEST -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully`) {
			t.Errorf("iptables-%s from the image: %v\n%s", backend, err, out)
		}
	}
	if out, err := run(root, "modprobe", "--version"); err != nil || !strings.Contains(out, "kmod version") {
		t.Errorf("modprobe from the image: %v\n%s", err, out)
	}
}

// checkDryRun runs the sink's --version and its dry run on the demo
// cluster from the image.
func checkDryRun(t *testing.T, repo, root, sink string) {
	if out, err := run(root, "/usr/local/bin/"+sink, "--version"); err != nil || !strings.HasPrefix(out, sink+" version test (commit ") {
		t.Errorf("%s --version from the image: %v\n%s", sink, err, out)
	}
	demo, err := os.ReadFile(filepath.Join(repo, "examples", "demo", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", "cluster.yaml"), demo, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(root, "/usr/local/bin/"+sink, "--dry-run", "--from-file", "/tmp/cluster.yaml",
		"--node-name", "demo-node", "--node-address", "10.244.2.1")
	if err != nil || !strings.Contains(out, "10.96.0.10") {
		t.Errorf("%s --dry-run from the image: %v\n%s", sink, err, out)
	}
}
