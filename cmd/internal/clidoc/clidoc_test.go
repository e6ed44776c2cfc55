package clidoc

import "testing"

// TestRoffEscapes: what help text holds never becomes a roff request or
// escape.
func TestRoffEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`.TH evil`:      `\&.TH evil`,
		`'br`:           `\&'br`,
		`a\fBb`:         `a\efBb`,
		"--flag":        `\-\-flag`,
		"k×D…":          `k\[u00D7]D\[u2026]`,
		"bell\a":        "bell",
		"tab\tend":      "tab        end",
		"x" + "\u00a0y": `x\[u00A0]y`,
	} {
		if got := roff(in); got != want {
			t.Errorf("roff(%q) = %q, want %q", in, got, want)
		}
	}
}
