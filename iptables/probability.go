package iptables

// probability returns the statistic match's probability of picking 1 of n
// (canonicalProbability).
func probability(n int) string {
	if n < len(probabilities) {
		return probabilities[n][len(statisticArgs):]
	}
	return formatProbability(n)
}

// jumpArgs returns what follows the comment of the rule of a KUBE-SVC- or
// KUBE-SVL- chain that picks one of the n endpoints left, up to the
// endpoint's chain: the comment's closing quote (quoted), the statistic
// match (when n > 1) and " -j ".
func jumpArgs(n int, quoted bool) string {
	q := 0
	if quoted {
		q = 1
	}
	if n < len(jumpArgsMemo[q]) {
		return jumpArgsMemo[q][n]
	}
	return `"`[:q] + statisticArgs + formatProbability(n) + " -j "
}

const statisticArgs = " -m statistic --mode random --probability "

// probabilities memoizes probability's statistic match, and jumpArgsMemo
// jumpArgs, for the common endpoint counts.
var probabilities, jumpArgsMemo = func() ([]string, [2][]string) {
	probs := make([]string, 257)
	var jumps [2][]string
	for q := range jumps {
		jumps[q] = make([]string, len(probs))
		jumps[q][1] = `"`[:q] + " -j "
	}
	for n := 2; n < len(probs); n++ {
		probs[n] = statisticArgs + formatProbability(n)
		for q := range jumps {
			jumps[q][n] = `"`[:q] + probs[n] + " -j "
		}
	}
	probs[1] = statisticArgs + formatProbability(1)
	return probs, jumps
}()

// formatProbability returns the probability of picking 1 of n: the
// fraction iptables stores for kube-proxy's text (1/n with ten decimals),
// as its shortest decimal.
func formatProbability(n int) string {
	return canonicalProbability(kubeProxyBits(n))
}
