package flagvalue

import (
	"slices"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"ch-run --set-env=config.env img --", []string{"ch-run", "--set-env=config.env", "img", "--"}},
		{`  singularity exec  'my image.sif' `, []string{"singularity", "exec", "my image.sif"}},
		{`env A="x \"y\" \\z" B=\$HOME`, []string{"env", `A=x "y" \z`, "B=$HOME"}},
		{`a''b ""`, []string{"ab", ""}},
	}
	for _, tc := range tests {
		got, err := SplitWords(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", `a "b`, `a 'b`, `a\`} {
		if _, err := SplitWords(bad); err == nil {
			t.Errorf("SplitWords(%q): no error", bad)
		}
	}
}
