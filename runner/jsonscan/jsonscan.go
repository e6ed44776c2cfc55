// Package jsonscan walks a JSON object written on one line, key by key,
// without decoding it: the fast path of the ledger's fold and of the
// readers of a run's metrics, where encoding/json would take seconds and
// a kilobyte a line. It reads only what encoding/json reads the same way
// (FuzzEachField holds it to that): keys without escapes or control
// bytes, in UTF-8, strings without control bytes and with JSON's
// escapes only, numbers by JSON's grammar, literals of the right letters,
// brackets that close. A line it declines, its caller decodes with
// encoding/json, which reads what is valid and names what is not.
//
// It is pure, stdlib only.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// Syntax is how an object may be written besides the way json.Marshal
// writes one (no blanks).
type Syntax struct {
	// Blanks: JSON's blanks (space, tab, CR, LF) around any token, as
	// Python's json.dumps writes ", " and ": ".
	Blanks bool
	// NonFinite: NaN, Infinity and -Infinity as values, as Python writes
	// a float that is none (encoding/json refuses them).
	NonFinite bool
	// RawKeys: keys with escapes, or not in UTF-8, too, handed to f as
	// they are written, not as encoding/json decodes them: for a caller
	// that looks for a plain key and passes the others by.
	RawKeys bool
}

var (
	// Compact is an object as json.Marshal writes it: the ledger's.
	Compact = Syntax{}
	// Python is an object as Python's json.dumps writes it by default: a
	// run's metrics lines.
	Python = Syntax{Blanks: true, NonFinite: true}
)

// maxDepth bounds the nesting SkipValue follows, as encoding/json's.
const maxDepth = 10000

// EachField calls f with each key and raw value of line, in order. It
// reports false when line is not one object written in syntax s, or when
// f returns false; f may have been called for the keys before.
func (s Syntax) EachField(line []byte, f func(key, val []byte) bool) bool {
	return s.EachFieldUntil(line, nil, f)
}

// EachFieldUntil is EachField up to the key stop: at that key it reports
// true, and neither reads its value nor what follows it.
func (s Syntax) EachFieldUntil(line, stop []byte, f func(key, val []byte) bool) bool {
	n := len(line)
	i := s.blanks(line, 0)
	if i >= n || line[i] != '{' {
		return false
	}
	if i = s.blanks(line, i+1); i < n && line[i] == '}' {
		return s.blanks(line, i+1) == n // {}
	}
	for {
		if i >= n || line[i] != '"' {
			return false
		}
		key, k, ok := s.key(line, i)
		if !ok {
			return false
		}
		if i = s.blanks(line, k+1); i >= n || line[i] != ':' {
			return false
		}
		if stop != nil && string(key) == string(stop) {
			return true
		}
		start := s.blanks(line, i+1)
		end, ok := s.SkipValue(line, start)
		if !ok || !f(key, line[start:end]) {
			return false
		}
		switch i = s.blanks(line, end); {
		case i >= n:
			return false
		case line[i] == '}':
			return s.blanks(line, i+1) == n
		case line[i] == ',':
			i = s.blanks(line, i+1)
		default:
			return false
		}
	}
}

// key returns the key of the string at line[i] and where it ends: false
// for a key encoding/json would decode to other bytes (an escape, bytes
// not in UTF-8), unless RawKeys.
func (s Syntax) key(line []byte, i int) (key []byte, end int, ok bool) {
	if s.RawKeys {
		end, ok := SkipString(line, i)
		if !ok {
			return nil, 0, false
		}
		return line[i+1 : end-1], end - 1, true
	}
	k, ascii := i+1, true
	for k < len(line) && line[k] != '"' {
		switch c := line[k]; {
		case c == '\\' || c < 0x20:
			return nil, 0, false // escapes: encoding/json's to decode
		case c >= 0x80:
			ascii = false
		}
		k++
	}
	if k >= len(line) || !ascii && !utf8.Valid(line[i+1:k]) {
		return nil, 0, false
	}
	return line[i+1 : k], k, true
}

// blanks returns where the blanks from line[i] end: i itself in Compact.
func (s Syntax) blanks(line []byte, i int) int {
	if !s.Blanks {
		return i
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n' || line[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the end of the JSON value that starts at line[i], and
// whether there is one.
func (s Syntax) SkipValue(line []byte, i int) (int, bool) { return s.skipNested(line, i, 0) }

func (s Syntax) skipNested(line []byte, i, depth int) (int, bool) {
	if i >= len(line) || depth > maxDepth {
		return 0, false
	}
	switch c := line[i]; {
	case c == '"':
		return SkipString(line, i)
	case c == '{':
		return s.skipObject(line, i, depth)
	case c == '[':
		return s.skipArray(line, i, depth)
	case c == '-' || '0' <= c && c <= '9':
		if end, ok := numberEnd(line, i); ok || !s.NonFinite {
			return end, ok
		}
		return literal(line, i, "-Infinity")
	case s.NonFinite && (c == 'N' || c == 'I'):
		if end, ok := literal(line, i, "NaN"); ok {
			return end, true
		}
		return literal(line, i, "Infinity")
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if end, ok := literal(line, i, lit); ok {
				return end, true
			}
		}
		return 0, false
	}
}

// literal returns the end of lit at line[i], if it is there.
func literal(line []byte, i int, lit string) (int, bool) {
	if len(line)-i >= len(lit) && string(line[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// skipObject returns the end of the object at line[i].
func (s Syntax) skipObject(line []byte, i, depth int) (int, bool) {
	if i = s.blanks(line, i+1); i < len(line) && line[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return 0, false
		}
		j, ok := SkipString(line, i)
		if j = s.blanks(line, j); !ok || j >= len(line) || line[j] != ':' {
			return 0, false
		}
		if j, ok = s.skipNested(line, s.blanks(line, j+1), depth+1); !ok {
			return 0, false
		}
		if j = s.blanks(line, j); j >= len(line) {
			return 0, false
		}
		switch line[j] {
		case ',':
			i = s.blanks(line, j+1)
		case '}':
			return j + 1, true
		default:
			return 0, false
		}
	}
}

// skipArray returns the end of the array at line[i].
func (s Syntax) skipArray(line []byte, i, depth int) (int, bool) {
	if i = s.blanks(line, i+1); i < len(line) && line[i] == ']' {
		return i + 1, true
	}
	for {
		j, ok := s.skipNested(line, i, depth+1)
		if j = s.blanks(line, j); !ok || j >= len(line) {
			return 0, false
		}
		switch line[j] {
		case ',':
			i = s.blanks(line, j+1)
		case ']':
			return j + 1, true
		default:
			return 0, false
		}
	}
}

// numberEnd returns the end of the JSON number at line[i], by JSON's
// grammar: no leading zero, digits after a point and in an exponent.
func numberEnd(line []byte, i int) (int, bool) {
	n := len(line)
	digits := func() bool {
		j := i
		for i < n && '0' <= line[i] && line[i] <= '9' {
			i++
		}
		return i > j
	}
	if line[i] == '-' {
		i++
	}
	switch {
	case i < n && line[i] == '0':
		i++
	case !digits():
		return 0, false
	}
	if i < n && line[i] == '.' {
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < n && (line[i] == 'e' || line[i] == 'E') {
		i++
		if i < n && (line[i] == '+' || line[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	return i, true
}

// SkipString returns the end of the JSON string that starts at line[i]:
// no control byte, and only the escapes JSON has. Most strings have no
// escape: their end is found with IndexByte and their bytes checked eight
// at a time.
func SkipString(line []byte, i int) (int, bool) {
	j := i + 1
	k := bytes.IndexByte(line[j:], '"')
	if k < 0 {
		return 0, false
	}
	seg := line[j : j+k]
	if bytes.IndexByte(seg, '\\') >= 0 {
		return skipEscaped(line, i)
	}
	if hasControl(seg) {
		return 0, false
	}
	return j + k + 1, true
}

// hasControl reports whether b holds a byte below 0x20.
func hasControl(b []byte) bool {
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		// A byte below 0x20 (and below 0x80) sets its high bit here.
		if (x-0x2020202020202020)&^x&0x8080808080808080 != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// skipEscaped is SkipString for a string with escapes.
func skipEscaped(line []byte, i int) (int, bool) {
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j++; j >= len(line) {
				return 0, false
			}
			switch line[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(line) {
					return 0, false
				}
				for _, h := range line[j+1 : j+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, false
					}
				}
				j += 4
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		}
	}
	return 0, false
}
