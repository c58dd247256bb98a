package iptables

import (
	"bytes"
	"math"
	"net/netip"
	"strconv"
)

// Rules are rendered, written to iptables-restore and compared with the
// kernel in one canonical form: iptables-save's form, except where that
// spends bytes on what the kernel does not keep, which are written as
// short as iptables reads them back to the same rule:
//
//   - a host address of -s or -d has no prefix length ("-d 10.96.0.10",
//     "-s fd00::5"; iptables-save prints "/32" and "/128");
//   - a statistic probability is the shortest decimal that iptables stores
//     as the same 31-bit fraction ("0.5", "0.3333333335"; iptables-save
//     prints eleven decimals, "0.50000000000").
//
// What iptables-save prints is brought to that form when it is read
// (canonicalRule), so the kernel's rules and ours are compared as text,
// line by line, as before. Both forms are restore input of the same rule.

// probabilityBits is what iptables stores for the statistic match's
// probability p: lround(p * 2^31) (libxt_statistic), which the kernel
// compares with a 31-bit random number.
func probabilityBits(p float64) uint32 { return uint32(math.Round(p * 0x80000000)) }

// kubeProxyBits is what iptables stores for kube-proxy's probability of
// picking 1 of n endpoints (its text: 1/n with ten decimals).
func kubeProxyBits(n int) uint32 {
	kp, _ := strconv.ParseFloat(strconv.FormatFloat(1/float64(n), 'f', 10, 64), 64)
	return probabilityBits(kp)
}

// shortestProbability returns the shortest decimal that iptables stores as
// v: the decimal nearest to v/2^31 with the fewest digits that parses back
// to v. Eleven digits, iptables-save's, always do.
func shortestProbability(v uint32) string {
	p := float64(v) / 0x80000000
	for digits := 1; ; digits++ {
		s := strconv.FormatFloat(p, 'f', digits, 64)
		if x, err := strconv.ParseFloat(s, 64); err == nil && probabilityBits(x) == v || digits >= 11 {
			return s
		}
	}
}

// probabilityMemo maps what iptables stores for kube-proxy's probabilities
// of picking 1 of 2 to 256 endpoints to their canonical text, and
// savedProbabilities iptables-save's text of them (eleven decimals) to the
// same (both read only after initialization).
var probabilityMemo, savedProbabilities = func() (map[uint32]string, map[string]string) {
	m := make(map[uint32]string, 256)
	saved := make(map[string]string, 256)
	for n := 2; n <= 256; n++ {
		v := kubeProxyBits(n)
		m[v] = shortestProbability(v)
		saved[strconv.FormatFloat(float64(v)/0x80000000, 'f', 11, 64)] = m[v]
	}
	return m, saved
}()

// canonicalProbability returns the canonical text of the probability
// iptables stores as v.
func canonicalProbability(v uint32) string {
	if s, ok := probabilityMemo[v]; ok {
		return s
	}
	return shortestProbability(v)
}

// prefixText returns a prefix as canonical rules write it: the address
// alone for a single host, else the masked prefix (as the kernel keeps
// it).
func prefixText(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.Masked().String()
}

// hostSuffix returns how many bytes of a -s or -d argument that
// iptables-save printed are the prefix length of a single host ("/32" of
// an IPv4 address, "/128" of an IPv6 one), or 0.
func hostSuffix(arg []byte) int {
	v6 := bytes.IndexByte(arg, ':') >= 0
	switch {
	case !v6 && bytes.HasSuffix(arg, []byte("/32")):
		return len("/32")
	case v6 && bytes.HasSuffix(arg, []byte("/128")):
		return len("/128")
	}
	return 0
}

// canonicalRule returns a rule line as iptables-save printed it
// ("-A chain ...") in canonical form. iptables-save prints the source and
// destination first ("-A chain [! ]-s a [! ]-d a ..."), so only they are
// looked at, never a comment's text. buf is scratch space (the result
// never refers to it).
func canonicalRule(line []byte, buf *[]byte) string {
	sp := bytes.IndexByte(line[len("-A "):], ' ')
	if sp < 0 {
		return string(line)
	}
	out := (*buf)[:0]
	start := 0 // line[start:] is not copied to out yet
	pos := len("-A ") + sp
	for _, flag := range [2]string{" -s ", " -d "} {
		at := pos
		if bytes.HasPrefix(line[at:], []byte(" !")) {
			at += len(" !")
		}
		if !bytes.HasPrefix(line[at:], []byte(flag)) {
			continue
		}
		arg := at + len(flag)
		end := bytes.IndexByte(line[arg:], ' ')
		if end < 0 {
			end = len(line)
		} else {
			end += arg
		}
		if n := hostSuffix(line[arg:end]); n > 0 {
			out = append(out, line[start:end-n]...)
			start = end
		}
		pos = end
	}
	if i := bytes.Index(line[pos:], []byte(statisticArgs)); i >= 0 {
		arg := pos + i + len(statisticArgs)
		end := bytes.IndexByte(line[arg:], ' ')
		if end < 0 {
			end = len(line)
		} else {
			end += arg
		}
		c, ok := savedProbabilities[string(line[arg:end])]
		if !ok {
			if p, err := strconv.ParseFloat(string(line[arg:end]), 64); err == nil {
				c, ok = canonicalProbability(probabilityBits(p)), true
			}
		}
		if ok && c != string(line[arg:end]) {
			out = append(append(out, line[start:arg]...), c...)
			start = end
		}
	}
	if start == 0 {
		*buf = out
		return string(line)
	}
	out = append(out, line[start:]...)
	*buf = out
	return string(out)
}
