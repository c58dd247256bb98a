package monitoring

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// promqlWords are PromQL's keywords, aggregation operators and number
// literals: identifiers that are not metric names.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// groupingWords take a parenthesised list of label names.
var groupingWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// metricNames returns the metric names a PromQL expression selects, sorted
// and without repeats: the identifiers outside label matchers, strings,
// ranges and grouping lists that are neither functions (followed by "(")
// nor keywords. Grafana variables ($name, ${name}) are skipped. promtool
// checks the syntax; this finds the names in what it accepts.
func metricNames(expr string) []string {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipTo(expr, i, '}')
		case c == '[':
			i = skipTo(expr, i, ']')
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skipTo(expr, i, '}')
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.' ||
				(expr[i] == '+' || expr[i] == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case isIdent(c, true):
			start := i
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
			word := expr[start:i]
			next := i
			for next < len(expr) && strings.ContainsRune(" \t\n", rune(expr[next])) {
				next++
			}
			paren := next < len(expr) && expr[next] == '('
			switch {
			case groupingWords[word] && paren:
				i = skipTo(expr, next, ')')
			case paren || promqlWords[strings.ToLower(word)]:
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// skipString returns the index after the string literal starting at i.
func skipString(s string, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quote != '`':
			i++
		case s[i] == quote:
			return i + 1
		}
	}
	return i
}

// skipTo returns the index after the close that ends the bracket opening
// at i, stepping over string literals.
func skipTo(s string, i int, close byte) int {
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '"' || s[i] == '\'' || s[i] == '`':
			i = skipString(s, i) - 1
		case s[i] == close:
			return i + 1
		}
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIdent reports whether c may be in a metric name (first: may start one).
func isIdent(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && isDigit(c)
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`absent(up{job="kube-proxy"} == 1)`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (job, instance, le) (rate(a_bucket{job="x", le!="+Inf"}[10m]))) > 5`, []string{"a_bucket"}},
		{`sum without (ip_family) (rate(b_total[$__rate_interval])) / on(instance) group_left(version) c_info`, []string{"b_total", "c_info"}},
		{`increase(d_total{code=~"5..", q="}{[("}[5m] offset 1h) and bool e or f unless g atan2 h`, []string{"d_total", "e", "f", "g", "h"}},
		{`topk(5, i) + count_values("j", k) + quantile(0.9, l) * 1e-3 + 0x1F + Inf - NaN + .5`, []string{"i", "k", "l"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)") + time() - n @ start()`, []string{"m", "n"}},
		{"o # a comment naming p\n+ q:recorded:rate5m", []string{"o", "q:recorded:rate5m"}},
		{`rate(r{instance=~"$instance"}[${__range}]) + ${var} + $var`, []string{"r"}},
		{`sum(s) by (le) + max(t) without(u)`, []string{"s", "t"}},
		{`time() - v_seconds{a='it\'s'} > 2 * 60`, []string{"v_seconds"}},
	} {
		if diff := cmp.Diff(tc.want, metricNames(tc.expr)); diff != "" {
			t.Errorf("metricNames(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}
