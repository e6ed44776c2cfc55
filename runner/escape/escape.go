// Package escape shows text that came from runs or inputs (a run's
// stderr and output, an origin, a file name, a metric's name) on a
// terminal: what a terminal would act on — control characters, bytes that
// are not UTF-8, the Unicode controls that reorder or hide text — is
// shown escaped instead of acted on. Pure, stdlib only.
package escape

import (
	"strings"
	"unicode/utf8"
)

// Term returns s as nodepack prints text that came from runs or inputs
// (a run's stderr, an origin, a file name): what a terminal would act on
// is shown instead of acted on. Control characters but tab (ESC, CR, a
// newline inside a value, BEL, DEL, C1) become \xNN or \u00NN, bytes
// that are not UTF-8 \xNN, and the Unicode controls that reorder or hide
// text (bidi overrides and isolates, line and paragraph separators) \uNNNN.
func Term(s string) string {
	if Clean(s) {
		return s // the common case: no copy
	}
	var b strings.Builder
	writeEscaped(&b, s, false)
	return b.String()
}

// Clean reports whether s has nothing Term escapes: printable ASCII and
// tabs (anything past ASCII is looked at closer by Term).
func Clean[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

// Len is about how long s is escaped: four bytes for each ASCII
// control, six for each byte past ASCII (at most), so that the line is
// made in one allocation.
func Len(s []byte) int {
	n := len(s)
	for _, c := range s {
		switch {
		case c < 0x20 && c != '\t', c == 0x7f:
			n += 3
		case c >= 0x80:
			n += 5
		}
	}
	return n
}

// writeEscaped writes s to b as Append does.
func writeEscaped(b *strings.Builder, s string, quoted bool) {
	b.Write(Append(make([]byte, 0, len(s)+len(s)/4), s, quoted))
}

// Append appends s to dst with what Term escapes escaped; with quoted, for
// the inside of bash's $'…' as well: backslashes and single quotes too, so
// that it pastes back as the same bytes. A run's control bytes by the
// megabyte (--live) cost a few appends each, no formatting.
func Append(dst []byte, s string, quoted bool) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch {
			case c < 0x20 && c != '\t', c == 0x7f:
				dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			case quoted && (c == '\\' || c == '\''):
				dst = append(dst, '\\', c)
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, '\\', 'x', hexDigits[s[i]>>4], hexDigits[s[i]&0xf])
		case r < 0xa0, hidesText(r):
			dst = append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// hidesText reports whether r reorders or hides the text around it on a
// terminal: bidi marks, embeddings, overrides and isolates, and the line
// and paragraph separators.
func hidesText(r rune) bool {
	return r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x2028 || r == 0x2029
}
