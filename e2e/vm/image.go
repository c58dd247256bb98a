package vm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// imageFormat changes whenever the layout of the base image or its init
// script changes, so that cached images built by older code are not reused.
const imageFormat = "proxysinks-vm-image-3"

// moduleDirs are the kernel source directories whose modules all go into the
// image: IPVS and its schedulers, ipset and its types, conntrack, NAT,
// nf_tables, the xtables matches and targets, bridges and SCTP.
var moduleDirs = []string{
	"kernel/net/netfilter",
	"kernel/net/ipv4/netfilter",
	"kernel/net/ipv6/netfilter",
	"kernel/net/bridge",
	"kernel/net/sctp",
}

// moduleFiles are further single modules the project needs.
var moduleFiles = []string{
	"kernel/drivers/net/dummy.ko",
	"kernel/drivers/net/veth.ko",
	"kernel/drivers/virtio/virtio_pci.ko", // Options.NIC
	"kernel/drivers/net/virtio_net.ko",
}

// hostBinaries are the tools copied into the image with the shared libraries
// they link; the map value is the guest path. Symlinks are added by init.
var hostBinaries = map[string]string{
	"/usr/sbin/ipvsadm":              "/usr/sbin/ipvsadm",
	"/usr/sbin/ipset":                "/usr/sbin/ipset",
	"/usr/sbin/xtables-nft-multi":    "/usr/sbin/xtables-nft-multi",
	"/usr/sbin/xtables-legacy-multi": "/usr/sbin/xtables-legacy-multi",
	"/sbin/ip":                       "/usr/sbin/ip",
	"/bin/kmod":                      "/usr/bin/kmod",
}

// hostFiles are data files the tools read.
var hostFiles = []string{"/etc/protocols", "/etc/services", "/etc/ethertypes"}

// hostDirs are copied whole (iptables loads its extensions from here with
// dlopen, so ldd cannot see them).
var hostDirs = []string{"/usr/lib/x86_64-linux-gnu/xtables"}

// Kernel is an unpacked Debian kernel package as `make deps` leaves it.
type Kernel struct {
	Dir     string // the package's root (holds boot/ and lib/modules/)
	Version string // e.g. 6.1.0-57-cloud-amd64
}

// Vmlinuz returns the path of the kernel image.
func (k Kernel) Vmlinuz() string { return filepath.Join(k.Dir, "boot", "vmlinuz-"+k.Version) }

// ModulesDir returns the modules directory, /lib/modules/<version>.
func (k Kernel) ModulesDir() string { return filepath.Join(k.Dir, "lib", "modules", k.Version) }

// FindKernel locates the kernel that `make deps` unpacked under cacheDir.
func FindKernel(cacheDir string) (Kernel, error) {
	dir := filepath.Join(cacheDir, "kernel", "current")
	v, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return Kernel{}, fmt.Errorf("vm: no kernel in %s (run make deps): %w", dir, err)
	}
	k := Kernel{Dir: dir, Version: strings.TrimSpace(string(v))}
	if _, err := os.Stat(k.Vmlinuz()); err != nil {
		return Kernel{}, fmt.Errorf("vm: kernel image missing (run make deps): %w", err)
	}
	return k, nil
}

// imageFile is one file of the base image: where it comes from on the host and
// where it goes in the guest.
type imageFile struct {
	host, guest string
}

// BuildBase returns the path of the base initramfs (an uncompressed newc
// cpio archive) for the kernel, building it if no image with the same content
// hash is cached in cacheDir/vm.
func BuildBase(cacheDir string, k Kernel) (string, error) {
	files, err := baseFiles(k)
	if err != nil {
		return "", err
	}
	sum, err := contentHash(files)
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, "vm", "base-"+sum[:16]+".cpio")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	stage, err := os.MkdirTemp(filepath.Dir(out), "stage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	for _, f := range files {
		if err := stageFile(stage, f); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(stage, "init"), []byte(initScript), 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp-" + filepath.Base(stage)
	if err := writeCPIO(stage, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	// Rename is atomic: concurrent builders (go test runs packages in
	// parallel) produce identical content, and the last one wins.
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	// Images of other contents (an older harness, a changed tool) are stale.
	if old, err := filepath.Glob(filepath.Join(filepath.Dir(out), "base-*.cpio")); err == nil {
		for _, o := range old {
			if o != out {
				os.Remove(o)
			}
		}
	}
	return out, nil
}

// baseFiles lists every file of the base image, sorted by guest path.
func baseFiles(k Kernel) ([]imageFile, error) {
	var files []imageFile
	add := func(host, guest string) { files = append(files, imageFile{host, guest}) }

	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, errors.New("vm: busybox not found (run make deps: busybox-static)")
	}
	add(busybox, "/bin/busybox")

	mods, err := kernelModules(k)
	if err != nil {
		return nil, err
	}
	guestMods := "/lib/modules/" + k.Version + "/"
	for _, m := range mods {
		add(filepath.Join(k.ModulesDir(), m), guestMods+m)
	}
	idx, err := filepath.Glob(filepath.Join(k.ModulesDir(), "modules.*"))
	if err != nil {
		return nil, err
	}
	for _, f := range idx {
		add(f, guestMods+filepath.Base(f))
	}

	libs := map[string]bool{}
	var elfs []string
	for host, guest := range hostBinaries {
		if _, err := os.Stat(host); err != nil {
			return nil, fmt.Errorf("vm: %s not found (run make deps): %w", host, err)
		}
		add(host, guest)
		elfs = append(elfs, host)
	}
	for _, d := range hostDirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return nil, fmt.Errorf("vm: read %s (run make deps): %w", d, err)
		}
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			add(p, p)
			elfs = append(elfs, p)
		}
	}
	for _, f := range hostFiles {
		if _, err := os.Stat(f); err == nil {
			add(f, f)
		}
	}
	for _, e := range elfs {
		deps, err := sharedLibraries(e)
		if err != nil {
			return nil, err
		}
		for _, l := range deps {
			libs[l] = true
		}
	}
	for l := range libs {
		add(l, l)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].guest < files[j].guest })
	return files, nil
}

// kernelModules returns the modules the image needs, relative to the modules
// directory, with their dependencies resolved from modules.dep.
func kernelModules(k Kernel) ([]string, error) {
	deps, err := readModulesDep(filepath.Join(k.ModulesDir(), "modules.dep"))
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	var visit func(m string) error
	visit = func(m string) error {
		if want[m] {
			return nil
		}
		d, ok := deps[m]
		if !ok {
			return fmt.Errorf("vm: module %s is not in modules.dep of %s", m, k.Version)
		}
		want[m] = true
		for _, dep := range d {
			if err := visit(dep); err != nil {
				return err
			}
		}
		return nil
	}
	for m := range deps {
		for _, dir := range moduleDirs {
			if strings.HasPrefix(m, dir+"/") {
				if err := visit(m); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, m := range moduleFiles {
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(want))
	for m := range want {
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// readModulesDep parses depmod's modules.dep: "path: dep1 dep2" per line.
func readModulesDep(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vm: read modules.dep (run make deps): %w", err)
	}
	defer f.Close()
	deps := map[string][]string{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		mod, rest, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, s.Err()
}

// sharedLibraries returns the libraries an ELF file loads, including the
// dynamic loader, as ldd reports them.
func sharedLibraries(elf string) ([]string, error) {
	out, err := exec.Command("ldd", elf).Output()
	if err != nil {
		// ldd fails on static binaries ("not a dynamic executable").
		return nil, nil
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("vm: %s needs %s, which is not installed", elf, f[0])
		}
	}
	return libs, nil
}

// contentHash hashes the image format, the init script and every file's guest
// path and content.
func contentHash(files []imageFile) (string, error) {
	h := sha256.New()
	io.WriteString(h, imageFormat+"\x00"+initScript+"\x00")
	for _, f := range files {
		r, err := os.Open(f.host)
		if err != nil {
			return "", fmt.Errorf("vm: hash %s: %w", f.host, err)
		}
		io.WriteString(h, f.guest+"\x00")
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("vm: hash %s: %w", f.host, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stageFile copies a host file (following symlinks) to its guest path under
// the staging directory.
func stageFile(stage string, f imageFile) error {
	dst := filepath.Join(stage, f.guest)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return copyFile(f.host, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm()|0o400)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("vm: copy %s: %w", src, err)
	}
	return out.Close()
}

// writeCPIO archives dir into a newc cpio file with the cpio tool, every
// entry owned by root.
func writeCPIO(dir, out string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command("cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	cmd.Stdout = f
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return errors.New("vm: cpio not found (run make deps)")
		}
		return fmt.Errorf("vm: cpio: %w: %s", err, stderr.String())
	}
	return f.Close()
}
