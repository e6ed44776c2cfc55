package escape

import (
	"strings"
	"testing"
)

func TestTerm(t *testing.T) {
	for _, tc := range []struct {
		description, in, want string
	}{
		{"plain text is left alone", "loss=0.41 epoch 3\tok", "loss=0.41 epoch 3\tok"},
		{"UTF-8 is left alone", "naïve 学习 ✓", "naïve 学习 ✓"},
		{"an OSC title and a screen clear", "\x1b]0;PWNED\x07\x1b[2J", `\x1b]0;PWNED\x07\x1b[2J`},
		{"a carriage return that would overwrite the line", "ok\rFAILED", `ok\x0dFAILED`},
		{"a newline inside a value", "tasks\n.txt", `tasks\x0a.txt`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"a C1 control (8-bit CSI)", "a\u009b2Jb", `a\u009b2Jb`},
		{"a byte that is not UTF-8", "caf\xe9", `caf\xe9`},
		{"a bidi override that reorders what follows", "evil\u202etxt.sh", `evil\u202etxt.sh`},
	} {
		if got := Term(tc.in); got != tc.want {
			t.Errorf("%s: Term(%q) = %q, want %q", tc.description, tc.in, got, tc.want)
		}
	}
}

// BenchmarkTermControlBytes is --live's cost for a run that prints
// control bytes by the megabyte (head -c 50M /dev/zero): 64 KiB of NULs
// escaped per line, as the live writer cuts a line without a newline.
func BenchmarkTermControlBytes(b *testing.B) {
	line := strings.Repeat("\x00", 64<<10)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		Term(line)
	}
}
