package iptables

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stored is what iptables keeps for a probability's text: lround(p * 2^31)
// (libxt_statistic's parse; the text is positive).
func stored(t *testing.T, text string) int64 {
	t.Helper()
	p, err := strconv.ParseFloat(text, 64)
	if err != nil {
		t.Fatalf("probability %q: %v", text, err)
	}
	return int64(math.Floor(p*2147483648 + 0.5))
}

// TestProbability: the probability of picking 1 of n is stored by iptables
// exactly as kube-proxy's text (1/n, ten decimals) is, is never longer
// than it, has the fewest decimals that are stored so, and is what
// canonicalRule makes of iptables-save's text (eleven decimals of the
// stored fraction).
func TestProbability(t *testing.T) {
	ns := []int{100000, 1 << 20}
	for n := 2; n <= 3000; n++ {
		ns = append(ns, n)
	}
	for _, n := range ns {
		got := probability(n)
		kp := fmt.Sprintf("%0.10f", 1.0/float64(n))
		v := stored(t, kp)
		if s := stored(t, got); s != v {
			t.Errorf("probability(%d) = %s, stored as %d; kube-proxy's %s as %d", n, got, s, kp, v)
			continue
		}
		if len(got) > len(kp) {
			t.Errorf("probability(%d) = %s, longer than kube-proxy's %s", n, got, kp)
		}
		// With one decimal less, the two decimals closest to the stored
		// fraction (below and above) are stored as something else.
		if digits := len(got) - len("0."); digits > 1 {
			scale := math.Pow(10, float64(digits-1))
			exact := float64(v) / 2147483648 * scale
			for _, m := range []float64{math.Floor(exact), math.Ceil(exact)} {
				if shorter := strconv.FormatFloat(m/scale, 'f', digits-1, 64); stored(t, shorter) == v {
					t.Errorf("probability(%d) = %s, but %s is stored the same", n, got, shorter)
				}
			}
		}
		save := fmt.Sprintf("-A KUBE-SVC-X -m comment --comment \"a\" -m statistic --mode random --probability %.11f -j KUBE-SEP-Y", float64(v)/2147483648)
		want := "-A KUBE-SVC-X -m comment --comment \"a\" -m statistic --mode random --probability " + got + " -j KUBE-SEP-Y"
		var buf []byte
		if c := canonicalRule([]byte(save), &buf); c != want {
			t.Errorf("n=%d: canonicalRule(%q) = %q, want %q", n, save, c, want)
		}
	}
}

// TestCanonicalRule: lines as iptables-save prints them, in canonical form.
func TestCanonicalRule(t *testing.T) {
	for _, tc := range []struct{ name, save, want string }{
		{"IPv4 destination host",
			`-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-X`,
			`-A KUBE-SERVICES -d 10.96.0.10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-X`},
		{"negated network kept, host stripped",
			`-A KUBE-SVC-X ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -j KUBE-MARK-MASQ`,
			`-A KUBE-SVC-X ! -s 10.244.0.0/16 -d 10.96.0.10 -p tcp -j KUBE-MARK-MASQ`},
		{"negated hosts",
			`-A C ! -s 10.1.2.3/32 ! -d fd00::1/128 -j DROP`,
			`-A C ! -s 10.1.2.3 ! -d fd00::1 -j DROP`},
		{"IPv6 source host",
			`-A KUBE-SEP-X -s fd00:244::5/128 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
			`-A KUBE-SEP-X -s fd00:244::5 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`},
		{"an IPv6 /32 is a network",
			`-A C -s 2001:db8::/32 -d 10.0.0.0/8 -j DROP`,
			`-A C -s 2001:db8::/32 -d 10.0.0.0/8 -j DROP`},
		{"an IPv4-mapped IPv6 host",
			`-A C -d ::ffff:10.0.0.1/128 -j DROP`,
			`-A C -d ::ffff:10.0.0.1 -j DROP`},
		{"a host at the end of the line",
			`-A C -s 10.0.0.1/32`,
			`-A C -s 10.0.0.1`},
		{"addresses after the matches are not looked at",
			`-A C -m comment --comment "x -s 10.0.0.1/32" -j DROP`,
			`-A C -m comment --comment "x -s 10.0.0.1/32" -j DROP`},
		{"probability of 1 in 2",
			`-A KUBE-SVC-X -s 10.0.0.1/32 -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-Y`,
			`-A KUBE-SVC-X -s 10.0.0.1 -m statistic --mode random --probability 0.5 -j KUBE-SEP-Y`},
		{"probability of 1 in 3",
			`-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-Y`,
			`-A KUBE-SVC-X -m statistic --mode random --probability 0.3333333335 -j KUBE-SEP-Y`},
		{"a probability one step of 2^-31 below 1 in 3",
			`-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333302 -j KUBE-SEP-Y`,
			`-A KUBE-SVC-X -m statistic --mode random --probability 0.333333333 -j KUBE-SEP-Y`},
		{"nothing to change",
			`-A KUBE-SVC-X -m comment --comment "default/web:http -> 10.244.1.5:8080" -j KUBE-SEP-Y`,
			`-A KUBE-SVC-X -m comment --comment "default/web:http -> 10.244.1.5:8080" -j KUBE-SEP-Y`},
		{"no rule", `-A C`, `-A C`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := []byte(strings.Repeat("x", 8)) // scratch that must not show
			if diff := cmp.Diff(tc.want, canonicalRule([]byte(tc.save), &buf)); diff != "" {
				t.Errorf("canonicalRule (-want +got):\n%s", diff)
			}
		})
	}
}
