package sweep

import (
	"os/exec"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// TestPlainWords checks the shortcut past the parser: the lines it takes
// are simple commands that bash parses (asked of bash itself where there
// is one), and it hands every line with syntax in it to the parser.
func TestPlainWords(t *testing.T) {
	for _, tc := range []struct {
		line  string
		plain bool
	}{
		{"python train.py --lr=0.1 --seed=3", true},
		{"  ./run.sh\tA=1 x,y:z+w@h%1 -", true},
		{"true 1", true},
		{"", true},
		{"FOO=1 bar", true},
		{"fi", false},
		{"done x", false},
		{"echo done", false}, // bash takes it; the parser says so
		{"if true", false},
		{"time sleep 1", false},
		{"echo 'a b'", true},
		{`python train.py --name "run 3" --tag='x;y|z' a"b c"'d'`, true},
		{`echo "fi" 'done'`, true},
		{`echo 'a`, false},
		{`echo "a`, false},
		{`echo "$HOME"`, false},
		{"echo \"`ls`\"", false},
		{`echo "a\"b"`, false},
		{`echo "hi!"`, false},
		{"a; b", false},
		{"a | b", false},
		{"a > out", false},
		{"a && b", false},
		{"echo $HOME", false},
		{"echo ~/x", false},
		{"{ a; }", false},
		{"! a", false},
		{"echo (", false},
		{"a\\ b", false},
		{"echo é", false},
	} {
		t.Run(tc.line, func(t *testing.T) {
			if got := plainWords(tc.line); got != tc.plain {
				t.Fatalf("plainWords(%q) = %v, want %v", tc.line, got, tc.plain)
			}
			if !tc.plain {
				return
			}
			if _, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(tc.line), ""); err != nil {
				t.Errorf("plainWords takes %q, the parser does not: %v", tc.line, err)
			}
			if bash, err := exec.LookPath("bash"); err == nil {
				if out, err := exec.Command(bash, "-n", "-c", " "+tc.line).CombinedOutput(); err != nil {
					t.Errorf("plainWords takes %q, bash -n does not: %v %s", tc.line, err, out)
				}
			}
		})
	}
}

// FuzzPlainWords checks that no line the shortcut takes is one bash
// rejects: the Go parser says so, or, where it is stricter than bash
// (invalid UTF-8 in quotes), bash -n itself.
func FuzzPlainWords(f *testing.F) {
	for _, s := range []string{"python a.py --x=1", "fi", "a b c", "a\tdo", "esac x", "x=1 then", `a 'b c' "d e"f`, `'fi' "then"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !plainWords(line) {
			return
		}
		if _, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), ""); err == nil {
			return
		}
		// A blank first: bash -c takes a leading - or + for its own option.
		if out, err := exec.Command("bash", "-n", "-c", " "+line).CombinedOutput(); err != nil {
			t.Errorf("plainWords takes %q, bash -n does not: %v %s", line, err, out)
		}
	})
}
