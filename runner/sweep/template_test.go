package sweep

import (
	"strings"
	"testing"
)

func TestParseTemplate(t *testing.T) {
	known := func(name string) bool { return isBuiltinPlaceholder(name) || name == "lr" }
	values := map[string]string{"rep": "2", "index": "7", "run_id": "abc", "run_dir": "/o/runs/abc", "lr": "0.1"}
	tests := []struct {
		description string
		in, want    string
		wantErr     string // in the error; empty for none
	}{
		{"plain text", "train.py", "train.py", ""},
		{"empty argument", "", "", ""},
		{"placeholders", "--out={run_dir}/{rep}-{lr}", "--out=/o/runs/abc/2-0.1", ""},
		{"doubled braces are braces", "{{lr}}={lr} {{}}", "{lr}=0.1 {}", ""},
		{"interpolations pass through", "hydra.run.dir=out/${now:%Y-%m-%d}/{index}", "hydra.run.dir=out/${now:%Y-%m-%d}/7", ""},
		{"unterminated interpolation is literal", "${HOME", "${HOME", ""},
		{"unknown placeholder", "--seed={seed}", "", "column 8: unknown placeholder {seed}"},
		{"unclosed brace", "{lr", "", "column 1: unclosed {"},
		{"brace inside a placeholder", "{l{r}", "", "column 1: unclosed {"},
		{"lone closing brace", "a}b", "", "column 2: unmatched }"},
		{"empty placeholder", "x{}", "", "column 2: empty placeholder"},
		{"a JSON argument needs doubled braces", `{"a": 1}`, "", `unknown placeholder {"a": 1}`},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			tmpl, err := parseTemplate(tc.in, known)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseTemplate(%q) error = %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTemplate(%q): %v", tc.in, err)
			}
			if got := tmpl.render(func(name string) string { return values[name] }); got != tc.want {
				t.Errorf("render(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
