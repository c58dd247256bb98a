package manifest

// kind is what YAML 1.1, as go.yaml.in/yaml/v2 resolves it, makes of a
// plain scalar.
type kind uint8

const (
	kindOther  kind = iota // anything the converter leaves to sigs.k8s.io/yaml
	kindString             // a string
	kindInt                // a decimal integer written as encoding/json writes it
	kindTrue
	kindFalse
	kindNull
)

// classify resolves a plain scalar the way go.yaml.in/yaml/v2 does for an
// untagged value decoded into interface{}, for the forms the converter
// writes itself; everything else (floats, octal, hexadecimal, binary,
// underscores, timestamps, infinities, merge keys, signs other than a
// leading "-") is kindOther.
func classify(s []byte) kind {
	switch s[0] {
	case '+', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return classifyNumeric(s)
	case '.':
		// A float such as .5 or .inf, or a string.
		for _, ch := range s {
			if !floatChar(ch) {
				return kindString
			}
		}
		return kindOther
	case 'y', 'Y', 'n', 'N', 't', 'T', 'f', 'F', 'o', 'O', '~':
		switch string(s) {
		case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
			return kindTrue
		case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
			return kindFalse
		case "~", "null", "Null", "NULL":
			return kindNull
		}
		return kindString
	}
	return kindString
}

// floatChar reports whether ch may appear in something strconv.ParseFloat
// accepts after a leading ".".
func floatChar(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch == '.' || ch == 'e' || ch == 'E' || ch == '+' || ch == '-' || ch == '_' ||
		ch == 'i' || ch == 'n' || ch == 'f' || ch == 'a' || ch == 'I' || ch == 'N' || ch == 'F' || ch == 'A'
}

// classifyNumeric handles a plain scalar starting with a sign or a digit.
func classifyNumeric(s []byte) kind {
	// The canonical decimal integer: -?(0|[1-9][0-9]*), at most 18 digits.
	d, neg := s, s[0] == '-'
	if neg {
		d = d[1:]
	}
	if len(d) >= 1 && len(d) <= 18 && isDigits(d) {
		if d[0] == '0' && (len(d) > 1 || neg) {
			return kindOther // octal, or -0
		}
		return kindInt
	}
	switch string(s) {
	case "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return kindOther
	}
	// A timestamp starts with four digits and a "-".
	if len(s) > 4 && s[4] == '-' && isDigits(s[:4]) {
		return kindOther
	}
	dots := 0
	for _, ch := range s {
		switch {
		case ch == '.':
			dots++
		case ch >= '0' && ch <= '9', ch >= 'a' && ch <= 'f', ch >= 'A' && ch <= 'F',
			ch == 'x', ch == 'X', ch == 'o', ch == 'O', ch == '+', ch == '-', ch == '_':
		default:
			// Not a character of any integer or float syntax.
			return kindString
		}
	}
	if dots >= 2 {
		return kindString // an IPv4 address, a version: neither int nor float
	}
	return kindOther
}

func isDigits(s []byte) bool {
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}
