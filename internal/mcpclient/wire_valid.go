package mcpclient

import "bytes"

// validJSON is json.Valid at a third of its cost on large strings, which is what a
// resource read's answer mostly is (its text or blob): json.Valid steps every byte
// through encoding/json's scanner, a function call a byte, where this walks a string
// in a plain loop. It accepts exactly what json.Valid accepts (FuzzValidJSON checks
// it): RFC 8259 values, strings of any bytes but control characters (not checked as
// UTF-8), at most maxNestingDepth arrays and objects deep.
func validJSON(data []byte) bool {
	v := validator{data: data}
	v.space()
	if !v.value() {
		return false
	}
	v.space()
	return v.i == len(data)
}

// maxNestingDepth is encoding/json's bound on nesting.
const maxNestingDepth = 10000

type validator struct {
	data  []byte
	i     int
	depth int
}

// at is the byte at the current index, 0 past the end (never valid where a byte is
// looked for).
func (v *validator) at() byte {
	if v.i < len(v.data) {
		return v.data[v.i]
	}
	return 0
}

func (v *validator) space() {
	for v.i < len(v.data) {
		switch v.data[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func (v *validator) value() bool {
	switch c := v.at(); {
	case c == '"':
		return v.str()
	case c == '{':
		return v.container('}', true)
	case c == '[':
		return v.container(']', false)
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	case c == '-' || isDigit(c):
		return v.number()
	}
	return false
}

// container checks an object (members) or an array whose opening bracket is at the
// current index and whose closing one is end.
func (v *validator) container(end byte, members bool) bool {
	if v.depth++; v.depth > maxNestingDepth {
		return false
	}
	v.i++
	v.space()
	if v.at() == end {
		v.i++
		v.depth--
		return true
	}
	for {
		if members && !v.memberName() {
			return false
		}
		if !v.value() {
			return false
		}
		v.space()
		switch v.at() {
		case ',':
			v.i++
			v.space()
		case end:
			v.i++
			v.depth--
			return true
		default:
			return false
		}
	}
}

// memberName checks a member's name and its colon, and skips the space after it.
func (v *validator) memberName() bool {
	if v.at() != '"' || !v.str() {
		return false
	}
	v.space()
	if v.at() != ':' {
		return false
	}
	v.i++
	v.space()
	return true
}

// str checks the string whose opening quote is at the current index.
func (v *validator) str() bool {
	data := v.data
	for i := v.i + 1; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			v.i = i + 1
			return true
		case c == '\\':
			n := escapeLength(data[i+1:])
			if n == 0 {
				return false
			}
			i += n
		case c < 0x20:
			return false
		}
	}
	return false
}

// escapeLength is the length of the valid escape that rest (what follows a backslash)
// begins with; 0 when it begins with none.
func escapeLength(rest []byte) int {
	if len(rest) == 0 {
		return 0
	}
	switch rest[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(rest) < 5 {
			return 0
		}
		for _, h := range rest[1:5] {
			if !isDigit(h) && (h|0x20 < 'a' || h|0x20 > 'f') {
				return 0
			}
		}
		return 5
	}
	return 0
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *validator) number() bool {
	if v.at() == '-' {
		v.i++
	}
	switch c := v.at(); {
	case c == '0':
		v.i++
	case isDigit(c):
		v.digits()
	default:
		return false
	}
	if v.at() == '.' {
		v.i++
		if !v.digits() {
			return false
		}
	}
	if c := v.at(); c == 'e' || c == 'E' {
		v.i++
		if c := v.at(); c == '+' || c == '-' {
			v.i++
		}
		if !v.digits() {
			return false
		}
	}
	return true
}

// digits skips a run of digits and says whether there was one.
func (v *validator) digits() bool {
	start := v.i
	for isDigit(v.at()) {
		v.i++
	}
	return v.i > start
}

func (v *validator) literal(word string) bool {
	if !bytes.HasPrefix(v.data[v.i:], []byte(word)) {
		return false
	}
	v.i += len(word)
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
