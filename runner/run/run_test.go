package run

import (
	"strings"
	"testing"
)

func TestSafeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"lr=0.1,seed=3", "lr=0.1,seed=3"},
		{"a b/c", "a_b_c"},
		{"../../etc", "etc"},
		{"..", ""},
		{"x\x00y\nz", "x_y_z"},
		{"ünïcode", "n_code"},
		{strings.Repeat("a", 100), strings.Repeat("a", 80)},
	}
	for _, tc := range tests {
		if got := SafeName(tc.in, 80); got != tc.want {
			t.Errorf("SafeName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string // nil: bash's
	}{
		{"python train.py --lr=0.1 --seed 3", []string{"python", "train.py", "--lr=0.1", "--seed", "3"}},
		{"  ./run.sh\ta,b  ", []string{"./run.sh", "a,b"}},
		{"true", []string{"true"}},
		{"python train.py && echo done", nil},
		{"python train.py > out", nil},
		{"echo $HOME", nil},
		{"python 'a b'", nil},
		{"ls *.txt", nil},
		{"FOO=1 python x", nil},
		{"cd /tmp", nil},
		{"echo hi", nil},
		{"exit 3", nil},
		{"ls ~", nil},
		{"a\\ b", nil},
		{"", nil},
		{"time python x", nil},
		{"python x # comment", nil},
	} {
		got, ok := Plain(tc.line)
		if ok != (tc.want != nil) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("Plain(%q) = %q, %v; want %q", tc.line, got, ok, tc.want)
		}
	}
}
