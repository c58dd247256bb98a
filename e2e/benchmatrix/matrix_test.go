package benchmatrix

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// Environment variables steering TestMatrix (make bench-report).
const (
	// MatrixEnv=1 runs the matrix (it takes minutes to hours).
	MatrixEnv = "PROXYSINKS_BENCH_MATRIX"
	// SizesEnv overrides the sizes, e.g. "1000x10,10000x10".
	SizesEnv = "PROXYSINKS_BENCH_SIZES"
	// SinksEnv keeps only the named sinks (comma-separated row names), in
	// that order.
	SinksEnv = "PROXYSINKS_BENCH_SINKS"
	// StraceEnv=0 skips the initial sync under strace; =1 runs it in
	// -short too (on the host; in the VM only without -short); =all
	// traces every system call there, not only the socket message calls.
	StraceEnv = "PROXYSINKS_BENCH_STRACE"
	// TimeoutEnv overrides the longest wait for the kernel (a Go
	// duration; by default 2 minutes plus 2 ms per endpoint, three times
	// that in the VM).
	TimeoutEnv = "PROXYSINKS_BENCH_TIMEOUT"
	// EndpointRepsEnv overrides the number of one-endpoint changes.
	EndpointRepsEnv = "PROXYSINKS_BENCH_ENDPOINT_REPS"
	// RepsEnv overrides the repetitions of the cells.
	RepsEnv = "PROXYSINKS_BENCH_REPS"
	// SteadyEnv overrides the steady window (a Go duration).
	SteadyEnv = "PROXYSINKS_BENCH_STEADY"
	// LabelEnv names the run's results file (default short or full).
	LabelEnv = "PROXYSINKS_BENCH_LABEL"
	// ProbeGapEnv sets the least pause between two kernel probes (a Go
	// duration; default: as long as the last probe took, at least 2 ms).
	// A longer gap leaves the proxy the CPU and the kernel's IPVS mutex
	// the probes take, at the cost of the probe's resolution.
	ProbeGapEnv = "PROXYSINKS_BENCH_PROBE_GAP"
	// guestEnv tells TestMatrixGuest, in the VM, where its Config is.
	guestEnv = "PROXYSINKS_BENCH_GUEST"
	// ScenariosEnv, a comma-separated list of Scenarios' names, runs only
	// those cells (default: all); for example "strace" runs only the
	// initial sync under strace, "initial" only the initial syncs (and,
	// in the VM, the IPVS floor beside them).
	ScenariosEnv = "PROXYSINKS_BENCH_SCENARIOS"
	// SupplementEnv=1 marks the run a supplement (Results.Supplement): a
	// run of some sinks alone, such as the sinks' initial syncs at sizes
	// where kube-proxy's figures come from an older run; its samples fill
	// only what no other run measured, and the memory section reads them.
	SupplementEnv = "PROXYSINKS_BENCH_SUPPLEMENT"
)

// samplePrefix starts the console lines carrying a guest's samples.
const samplePrefix = "MATRIX-SAMPLE "

// plan is what one run measures.
type plan struct {
	sizes              [][2]int
	reps, endpointReps int
	steady             time.Duration
	label              string
	sinks              []string // nil: all
	// vmStrace runs the initial sync under strace in the VM too (slow
	// under TCG: minutes at 1,000 x 10).
	vmStrace bool
	// only selects scenarios (Config.Only); nil: all.
	only map[string]bool
	// timeout, when set, bounds every wait for the kernel (default: from
	// the size).
	timeout time.Duration
	// probeGap is Config.ProbeGap.
	probeGap time.Duration
	// supplement is Results.Supplement.
	supplement bool
}

// changeSyncPeriod is the periodic resync of the proxies during the change
// cells: long enough that no resync overlaps a change (the steady cell
// keeps the default 30 s and measures the resync's cost).
const changeSyncPeriod = "1h"

// planFromEnv reads the plan from the environment (getenv) over the full
// or, with short, the short plan's defaults.
func planFromEnv(getenv func(string) string, short bool) (plan, error) {
	p := plan{sizes: fullSizes, reps: 3, endpointReps: 20, steady: 61 * time.Second, label: "full", vmStrace: true}
	if short {
		// Under 15 minutes on a nearly quiet 2-core host (kube-proxy ipvs
		// alone takes 8 in the VM): one repetition, three one-endpoint
		// changes each way, no strace cell.
		p = plan{sizes: [][2]int{{1000, 10}}, reps: 1, endpointReps: 3, steady: 31 * time.Second, label: "short"}
	}
	count := func(env string, dst *int) error {
		if v := getenv(env); v != "" {
			r, err := strconv.Atoi(v)
			if err != nil || r < 1 {
				return fmt.Errorf("%s: bad count %q (want a positive integer)", env, v)
			}
			*dst = r
		}
		return nil
	}
	duration := func(env string, dst *time.Duration) error {
		if v := getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("%s: bad duration %q (want a positive Go duration, such as 30m)", env, v)
			}
			*dst = d
		}
		return nil
	}
	if v := getenv(SizesEnv); v != "" {
		p.sizes = nil
		for _, f := range strings.Split(v, ",") {
			a, b, _ := strings.Cut(f, "x")
			n, err1 := strconv.Atoi(a)
			m, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil || n < 1 || m < 1 {
				return p, fmt.Errorf("%s: bad size %q (want NxM)", SizesEnv, f)
			}
			p.sizes = append(p.sizes, [2]int{n, m})
		}
	}
	if err := cmp.Or(count(RepsEnv, &p.reps), count(EndpointRepsEnv, &p.endpointReps),
		duration(SteadyEnv, &p.steady), duration(TimeoutEnv, &p.timeout), duration(ProbeGapEnv, &p.probeGap)); err != nil {
		return p, err
	}
	if v := getenv(SinksEnv); v != "" {
		for _, s := range strings.Split(v, ",") {
			p.sinks = append(p.sinks, strings.TrimSpace(s))
		}
	}
	if v := getenv(LabelEnv); v != "" {
		p.label = v
	}
	switch v := getenv(SupplementEnv); v {
	case "", "0":
	case "1":
		p.supplement = true
	default:
		return p, fmt.Errorf("%s: bad value %q (want 1 or 0)", SupplementEnv, v)
	}
	if v := getenv(ScenariosEnv); v != "" {
		p.only = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(Scenarios, f) {
				return p, fmt.Errorf("%s: no scenario %q (want some of %s)", ScenariosEnv, f, strings.Join(slices.Sorted(slices.Values(Scenarios)), ", "))
			}
			p.only[f] = true
		}
		if p.only["strace"] {
			p.vmStrace = true
		}
	}
	return p, nil
}

// TestMatrix runs the scenario matrix (see the package doc) and writes
// bench/report/results-<label>.json, then bench/REPORT.md and its plots
// from every results file there.
func TestMatrix(t *testing.T) {
	if os.Getenv(MatrixEnv) != "1" {
		t.Skip("the benchmark matrix runs only with " + MatrixEnv + "=1 (make bench-report)")
	}
	vm.Require(t)
	kubeBin := cluster.Require(t)
	pl, err := planFromEnv(os.Getenv, testing.Short())
	if err != nil {
		t.Fatal(err)
	}
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	build := func(out string, args ...string) string {
		path := filepath.Join(tools, out)
		cmd := exec.Command("go", append(args[:1:1], append([]string{"-o", path}, args[1:]...)...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return path
	}
	guestBin := build("benchmatrix.test", "test", "-c", "./e2e/benchmatrix")
	floorBin := build("ipvs.test", "test", "-c", "./netlinkraw/ipvs")
	nftFloorBin := build("nftables.test", "test", "-c", "./nftables")
	built := map[string]string{}
	bin := func(sink string) string {
		if built[sink] == "" {
			built[sink] = build(sink, "build", "./sinks/"+sink)
		}
		return built[sink]
	}
	sinks := Rows(bin, filepath.Join(kubeBin, "kube-proxy"))
	changeArgs := map[bool][]string{
		// kube-proxy takes --ipvs-sync-period in its ipvs mode and
		// --iptables-sync-period in the others (nftables included).
		true:  {"--iptables-sync-period=" + changeSyncPeriod, "--ipvs-sync-period=" + changeSyncPeriod},
		false: {"--sync-period=" + changeSyncPeriod},
	}
	for i := range sinks {
		if sinks[i].KubeProxy {
			sinks[i].Args = append(sinks[i].Args, "--hostname-override="+NodeName, "--nodeport-addresses="+NodeCIDR, "--conntrack-max-per-core=0", "--v=1")
		} else {
			sinks[i].Args = append(sinks[i].Args, "--node-name="+NodeName, "--nodeport-addresses="+NodeCIDR)
		}
	}
	if pl.sinks != nil {
		var keep []Sink
		for _, name := range pl.sinks {
			i := slices.IndexFunc(sinks, func(s Sink) bool { return s.Name == name })
			if i < 0 {
				t.Fatalf("%s: no sink %q", SinksEnv, name)
			}
			keep = append(keep, sinks[i])
		}
		sinks = keep
	}
	strace, _ := exec.LookPath("strace")
	if os.Getenv(StraceEnv) == "0" || testing.Short() && os.Getenv(StraceEnv) != "1" {
		strace = ""
	}

	run := Results{Label: pl.label, Started: time.Now().UTC(), Machine: describeMachine(), Command: commandLine(pl), HostLoad: []float64{hostLoad()}, Supplement: pl.supplement, CountsNFT: true}
	var mu sync.Mutex
	emit := func(s Sample) {
		mu.Lock()
		run.Samples = append(run.Samples, s)
		mu.Unlock()
	}
	out := filepath.Join(root, "bench", "report")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	save := func() {
		mu.Lock()
		defer mu.Unlock()
		run.Finished = time.Now().UTC()
		run.HostLoad = append(run.HostLoad, hostLoad())
		b, _ := json.MarshalIndent(run, "", " ")
		if err := os.WriteFile(filepath.Join(out, "results-"+pl.label+".json"), b, 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(pl.only) == 1 && pl.only["nft-floor"] {
		// The floor needs no cluster.
		for _, size := range pl.sizes {
			runOwnFloor(t, nftFloorBin, nftSink, size[0], size[1], emit)
		}
		pl.sizes = nil
	}
	for _, size := range pl.sizes {
		n, m := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", n, m), func(t *testing.T) {
			c := cluster.Start(t, cluster.Options{NoEndpointSliceController: true})
			ctx := context.Background()
			for _, nd := range [][2]string{{NodeName, NodeIP}, {remoteNode, "192.168.50.11"}} {
				if err := c.CreateNode(ctx, nd[0], "", nd[1]); err != nil {
					t.Fatal(err)
				}
			}
			writer, err := Writer(c.AdminKubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := Load(ctx, writer, n, m); err != nil {
				t.Fatal(err)
			}
			t.Logf("loaded %d services x %d endpoints in %s", n, m, time.Since(start).Round(time.Second))
			work := t.TempDir()
			server := "https://" + apiListen
			kpKC := filepath.Join(work, "kube-proxy.kubeconfig")
			if err := os.WriteFile(kpKC, c.Kubeconfig(server, c.AdminToken), 0o600); err != nil {
				t.Fatal(err)
			}
			sinkKC, err := c.SinkKubeconfig(ctx, server)
			if err != nil {
				t.Fatal(err)
			}
			adminGuest := filepath.Join(work, "admin-guest.kubeconfig")
			if err := os.WriteFile(adminGuest, c.Kubeconfig("https://"+cluster.GuestAPIAddr, c.AdminToken), 0o600); err != nil {
				t.Fatal(err)
			}
			timeout := 120*time.Second + time.Duration(n*m)*2*time.Millisecond
			vmTimeout := 3 * timeout // TCG: kube-proxy took over 140 s for 1,000 x 10 on a loaded host
			if pl.timeout > 0 {
				timeout, vmTimeout = pl.timeout, pl.timeout
			}
			for _, s := range sinks {
				kc := sinkKC
				if s.KubeProxy {
					kc = kpKC
				}
				cfg := Config{Sink: s, Services: n, Endpoints: m, Reps: pl.reps, EndpointReps: pl.endpointReps,
					Steady: pl.steady, ChangeArgs: changeArgs[s.KubeProxy], Timeout: timeout, ProbeGap: pl.probeGap, Only: pl.only, StraceAll: os.Getenv(StraceEnv) == "all", Emit: emit, Logf: t.Logf}
				cfg.Sink.Kubeconfig = kc
				if s.Kind == KindIPVS {
					cfg.Timeout = vmTimeout
					vmStrace := strace
					if !pl.vmStrace {
						vmStrace = ""
					}
					floor := ""
					if !s.KubeProxy && cfg.runs("initial") {
						floor = floorBin
					}
					runGuest(t, c, cfg, guestBin, floor, adminGuest, vmStrace, emit)
				} else {
					if s.Kind == KindNFTables && !s.KubeProxy && (cfg.runs("initial") || cfg.runs("nft-floor")) {
						runOwnFloor(t, nftFloorBin, s.Name, n, m, emit)
					}
					cfg.Strace, cfg.Client, cfg.APITarget, cfg.Work = strace, writer, fmt.Sprintf("127.0.0.1:%d", c.APIPort), t.TempDir()
					if err := Run(ctx, cfg); err != nil {
						t.Errorf("%s at %dx%d: %v", s.Name, n, m, err)
					}
				}
				save()
			}
		})
	}
	save()
	if err := Render(out, filepath.Join(root, "bench", "REPORT.md")); err != nil {
		t.Fatal(err)
	}
}

// runGuest runs the driver for an IPVS proxy in a fresh VM reaching the
// cluster's apiserver, and emits the samples it prints. With floorBin
// (netlinkraw/ipvs's test binary) the VM first measures the pre-encoded
// IPVS floor of the same size (ScFloor).
func runGuest(t *testing.T, c *cluster.Cluster, cfg Config, guestBin, floorBin, adminKC, strace string, emit func(Sample)) {
	t.Helper()
	work := t.TempDir()
	files := map[string]string{"benchmatrix.test": guestBin, "proxy": cfg.Sink.Bin}
	copyTo := func(src, name string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyTo(cfg.Sink.Kubeconfig, "proxy.kubeconfig")
	copyTo(adminKC, "admin.kubeconfig")
	cfg.Sink.Bin, cfg.Sink.Kubeconfig = "/job/bin/proxy", "/job/work/proxy.kubeconfig"
	if strace != "" {
		// strace and the libraries it links beyond libc, found by ldd.
		files["strace"] = strace
		if out, err := exec.Command("ldd", strace).Output(); err == nil {
			for _, l := range strings.Split(string(out), "\n") {
				f := strings.Fields(l)
				if len(f) >= 3 && f[1] == "=>" && !strings.HasPrefix(f[0], "libc.so") {
					files[f[0]] = f[2]
				}
			}
		}
		cfg.Strace = "/job/bin/strace"
	}
	gc := guestConfig{Config: cfg, AdminKubeconfig: "/job/work/admin.kubeconfig"}
	gc.APITarget = cluster.GuestAPIAddr
	b, err := json.Marshal(gc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "guest.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	mem := 3072
	if cfg.Services*cfg.Endpoints > 100000 {
		mem = 6144
	}
	script := `for m in ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh nf_conntrack veth; do modprobe $m; done
`
	if floorBin != "" {
		// The floor, once: on a fresh kernel, each further iteration would
		// wait a minute or more for the IPVS references of the last one's
		// namespace (its destinations' trash) to go.
		files["ipvs.test"] = floorBin
		script += fmt.Sprintf(`PROXYSINKS_IPVS_REFS=$(cat /sys/module/ip_vs/refcnt) PROXYSINKS_FLOOR_SIZES=%dx%d ipvs.test -test.run '^$' -test.bench '^BenchmarkFloor$' -test.benchtime 1x -test.timeout 30m
`, cfg.Services, cfg.Endpoints)
	}
	script += `benchmatrix.test -test.run '^TestMatrixGuest$' -test.v -test.timeout 0`
	// The samples printed before a VM that failed or was stopped (a cell
	// too slow to wait for) are kept.
	status, console, vmErr := vm.RunShellOutput(t, script, vm.Options{
		Files: files, WorkDir: work, MemoryMB: mem,
		Env:     []string{guestEnv + "=/job/work/guest.json"},
		Timeout: 4*cfg.Timeout + 20*time.Minute,
		NIC:     &vm.NIC{Forwards: []vm.Forward{{Guest: cluster.GuestAPIAddr, Host: fmt.Sprintf("127.0.0.1:%d", c.APIPort)}}},
	})
	s := bufio.NewScanner(strings.NewReader(console))
	s.Buffer(make([]byte, 64<<10), 1<<20)
	got := 0
	for s.Scan() {
		if smp, ok := parseFloor(s.Text()); ok {
			smp.Sink, smp.Kind, smp.Services, smp.Endpoints = cfg.Sink.Name, cfg.Sink.Kind, cfg.Services, cfg.Endpoints
			emit(smp)
			continue
		}
		if _, js, ok := strings.Cut(s.Text(), samplePrefix); ok {
			var smp Sample
			if err := json.Unmarshal([]byte(js), &smp); err != nil {
				t.Errorf("%s: bad sample line %q: %v", cfg.Sink.Name, js, err)
				continue
			}
			emit(smp)
			got++
		}
	}
	if vmErr != nil {
		t.Errorf("%s at %dx%d: the VM: %v (%d samples kept)", cfg.Sink.Name, cfg.Services, cfg.Endpoints, vmErr, got)
	} else if status != 0 {
		t.Errorf("%s at %dx%d: the guest driver failed (exit status %d)", cfg.Sink.Name, cfg.Services, cfg.Endpoints, status)
	}
	if got == 0 {
		t.Errorf("%s: no samples from the VM", cfg.Sink.Name)
	}
}

// parseFloor reads BenchmarkFloor's result line ("BenchmarkFloor/... N
// T ns/op K kernel-ops/op S syscalls/op") into a ScFloor sample.
func parseFloor(line string) (Sample, bool) { return parseBench(line, "BenchmarkFloor/", ScFloor) }

// parseOwnFloor reads BenchmarkFirstSyncFloor's result line of n x m,
// chunked ("... N T ns/op F floor-cpu-ms/op W floor-ms/op C
// sync-cpu-ms/op ... S sync-ms/op ..."), into a ScNFTOwnFloor sample.
func parseOwnFloor(line string, n, m int) (Sample, bool) {
	s, ok := parseBench(line, fmt.Sprintf("BenchmarkFirstSyncFloor/%dx%d/chunked-", n, m), ScNFTOwnFloor)
	if !ok || s.Syncs != 1 || s.CPUSeconds <= 0 {
		return Sample{}, false
	}
	s.Services, s.Endpoints = n, m
	return s, true
}

// parseBench reads a benchmark's result line, the benchmark's name
// starting with name, into a sample of scenario sc.
func parseBench(line, name, sc string) (Sample, bool) {
	i := strings.Index(line, name)
	if i < 0 {
		return Sample{}, false
	}
	f := strings.Fields(line[i:])
	if len(f) < 4 || f[3] != "ns/op" {
		return Sample{}, false
	}
	s := Sample{Scenario: sc, KernelOps: -1, NetlinkSyscalls: -1}
	for k := 2; k+1 < len(f); k += 2 {
		v, err := strconv.ParseFloat(f[k], 64)
		if err != nil {
			return Sample{}, false
		}
		switch f[k+1] {
		case "ns/op":
			s.Seconds = v / 1e9
		case "kernel-ops/op":
			s.KernelOps = v
		case "syscalls/op":
			s.NetlinkSyscalls = v
		case "bytes-sent/op":
			s.NFTBytes = int64(v)
		case "floor-ms/op": // after ns/op: the floor alone
			s.Seconds = v / 1e3
		case "floor-cpu-ms/op":
			s.CPUSeconds = v / 1e3
		case "sync-ms/op":
			s.SyncSeconds, s.Syncs = v/1e3, 1
		}
	}
	return s, s.Seconds > 0
}

// runOwnFloor runs the nftables package's BenchmarkFirstSyncFloor at
// n x m, chunked (its test binary bin, one iteration: it creates its
// namespaces), and emits its sample for the sink; the benchmark has
// sizes of 10 endpoints only (1,000, 10,000 and 30,000 services).
func runOwnFloor(t *testing.T, bin, sink string, n, m int, emit func(Sample)) {
	t.Helper()
	if m != 10 || !slices.Contains([]int{1000, 10000, 30000}, n) {
		return
	}
	bench := fmt.Sprintf("^BenchmarkFirstSyncFloor$/^%dx%d$/^chunked$", n, m)
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", "1x", "-test.timeout", "30m")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if smp, ok := parseOwnFloor(l, n, m); ok {
			smp.Sink, smp.Kind = sink, KindNFTables
			t.Logf("nftables floor: %s", strings.TrimSpace(l))
			emit(smp)
			return
		}
	}
	t.Errorf("%s: no result (%v):\n%s", bench, err, tail(string(out), 20))
}

// guestConfig is what the host hands TestMatrixGuest.
type guestConfig struct {
	Config
	AdminKubeconfig string
}

// TestMatrixGuest is the driver's side in the VM (runGuest starts it): it
// prints each sample as a console line.
func TestMatrixGuest(t *testing.T) {
	path := os.Getenv(guestEnv)
	if path == "" {
		t.Skip("runs only inside the VM under TestMatrix")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gc guestConfig
	if err := json.Unmarshal(b, &gc); err != nil {
		t.Fatal(err)
	}
	if gc.Client, err = Writer(gc.AdminKubeconfig); err != nil {
		t.Fatal(err)
	}
	gc.Work = t.TempDir()
	gc.Logf = t.Logf
	gc.Emit = func(s Sample) {
		b, _ := json.Marshal(s)
		fmt.Println(samplePrefix + string(b))
	}
	if err := Run(context.Background(), gc.Config); err != nil {
		t.Fatal(err)
	}
}

// commandLine is the make command that reproduces a plan.
func commandLine(p plan) string {
	var env []string
	for _, k := range []string{SizesEnv, SinksEnv, RepsEnv, EndpointRepsEnv, SteadyEnv, StraceEnv, TimeoutEnv, ProbeGapEnv, ScenariosEnv, SupplementEnv, LabelEnv} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+strconv.Quote(v))
		}
	}
	cmd := "make bench-report"
	if testing.Short() {
		cmd += " SHORT=1"
	}
	return strings.TrimSpace(strings.Join(env, " ") + " " + cmd)
}

// RenderEnv=1 makes TestMatrixRender rewrite bench/REPORT.md from the
// results files already in bench/report (no measurement).
const RenderEnv = "PROXYSINKS_BENCH_RENDER"

// TestMatrixRender rewrites the report from the saved results.
func TestMatrixRender(t *testing.T) {
	if os.Getenv(RenderEnv) != "1" {
		t.Skip("renders the report only with " + RenderEnv + "=1")
	}
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := Render(filepath.Join(root, "bench", "report"), filepath.Join(root, "bench", "REPORT.md")); err != nil {
		t.Fatal(err)
	}
}
