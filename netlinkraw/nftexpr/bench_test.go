package nftexpr

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// compileTable compiles every object of st the way a controller would:
// named sets referred to by name (ID 0), anonymous ones numbered.
func compileTable(b *testing.B, st *scriptTable) (rules, elems, anon int) {
	tab, err := NewTable(st.family)
	if err != nil {
		b.Fatal(err)
	}
	id := uint32(0)
	newID := func() uint32 { id++; return id }
	for _, d := range st.sets {
		if _, err := tab.AddSet(d, 0); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range st.chains {
		if _, err := Chain(c.name, c.typ, c.hook, c.prio, c.comment); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range st.rules {
		cr, err := tab.Rule(r.chain, r.text, r.comment, newID)
		if err != nil {
			b.Fatal(err)
		}
		rules++
		for _, s := range cr.Sets {
			anon += len(s.Elems)
		}
	}
	for _, e := range st.elems {
		if _, err := tab.Elem(e.set, e.key, e.value, e.comment); err != nil {
			b.Fatal(err)
		}
		elems++
	}
	return rules, elems, anon
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompile compiles a kube-proxy-shaped IPv4 table of 10,000
// services with 10 endpoints each (kubeShaped: 70,005 rules, 111,674
// elements, 16,670 affinity sets, 95,009 elements of anonymous sets): every
// chain, set, rule and element.
func BenchmarkCompile(b *testing.B) {
	st := kubeShaped(nft.FamilyIPv4, 10000, 10)
	var rules, elems, anon int
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		rules, elems, anon = compileTable(b, st)
		n++
	}
	// CPU time is steadier than wall time on a shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(n), "cpu-ms/op")
	b.ReportMetric(float64(rules), "rules/op")
	b.ReportMetric(float64(elems), "elems/op")
	b.ReportMetric(float64(anon), "anon-elems/op")
}
