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
