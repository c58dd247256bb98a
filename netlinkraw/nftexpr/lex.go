package nftexpr

// tokenize splits a rule text into tokens, appending to dst: words
// separated by blanks, with `{`, `}` and `,` tokens of their own, `@ name`
// joined into `@name`, and a quoted string kept whole with its quotes.
func tokenize(dst []string, s string) []string {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '{' || c == '}' || c == ',':
			dst = append(dst, s[i:i+1])
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				j++
			}
			if j < len(s) {
				j++
			}
			dst = append(dst, s[i:j])
			i = j
		default:
			j := i
			for j < len(s) && !isSep(s[j]) {
				j++
			}
			tok := s[i:j]
			if tok == "@" {
				// "@ name": knftables writes it joined, accept both.
				k := j
				for k < len(s) && s[k] == ' ' {
					k++
				}
				e := k
				for e < len(s) && !isSep(s[e]) {
					e++
				}
				if e > k {
					tok = "@" + s[k:e]
					j = e
				}
			}
			dst = append(dst, tok)
			i = j
		}
	}
	return dst
}

func isSep(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '{' || c == '}' || c == ',' || c == '"'
}

// unquote strips the quotes of a quoted token.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
