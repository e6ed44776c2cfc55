package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

func paramsRuns(t *testing.T, text string, command []string, opts expandOptions) ([]run.Run, error) {
	t.Helper()
	seq, err := readParams(strings.NewReader(text), "runs.jsonl", command, opts)
	if err != nil {
		t.Fatal(err)
	}
	return runsOf(seq)
}

func TestReadParams(t *testing.T) {
	text := `{"seed": 1, "lr": 1e-3, "name": "a b;$(touch pwned) *", "tags": [1, "x"], "ok": true, "none": null}` + "\n" +
		"\n# a comment\n" +
		`{"lr": 0.1, "name": "line\nbreak", "seed": 2}` + "\n"
	runs, err := paramsRuns(t, text, []string{"train", "--name={name}"}, expandOptions{Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"train", "--name=a b;$(touch pwned) *", "--seed=1", "--lr=1e-3", `--tags=[1,"x"]`, "--ok=true", "--none=null"},
		{"train", "--name=a b;$(touch pwned) *", "--seed=1", "--lr=1e-3", `--tags=[1,"x"]`, "--ok=true", "--none=null"},
		{"train", "--name=line\nbreak", "--lr=0.1", "--seed=2"},
		{"train", "--name=line\nbreak", "--lr=0.1", "--seed=2"},
	}
	if len(runs) != len(want) {
		t.Fatalf("%d runs, want %d", len(runs), len(want))
	}
	for i, r := range runs {
		if !slices.Equal(r.Args, want[i]) {
			t.Errorf("run %d argv = %q, want %q", i, r.Args, want[i])
		}
		if r.Rep != i%2 || r.Index != i || !slices.Contains(r.Env, "NODEPACK_REP="+string(rune('0'+i%2))) {
			t.Errorf("run %d: Rep %d Index %d Env %q", i, r.Rep, r.Index, r.Env)
		}
	}
	if runs[2].Origin != "runs.jsonl:4" {
		t.Errorf("Origin = %q, want runs.jsonl:4", runs[2].Origin)
	}
}

func TestReadParamsErrors(t *testing.T) {
	tests := []struct {
		description string
		text        string
		command     []string
		want        string
	}{
		{"not an object", "[1, 2]\n", nil, "runs.jsonl:1:1: want a JSON object"},
		{"syntax error", `{"a": 1,}` + "\n", nil, "runs.jsonl:1:"},
		{"unterminated", `{"a": "x` + "\n", nil, "runs.jsonl:1:"},
		{"two objects on a line", `{"a": 1} {"b": 2}` + "\n", nil, "runs.jsonl:1:"},
		{"duplicate key", `{"a": 1, "a": 2}` + "\n", nil, `runs.jsonl:1:10: duplicate key "a"`},
		{"empty key", `{"": 1}` + "\n", nil, "runs.jsonl:1:2: empty key"},
		{"key with braces", `{"{a}": 1}` + "\n", nil, `runs.jsonl:1:2: key "{a}"`},
		{"NUL in a value", `{"a": "x\u0000"}` + "\n", nil, "runs.jsonl:1:7: a: value contains a NUL byte"},
		{"missing placeholder value on a later line", `{"seed": 1}` + "\n" + `{"lr": 2}` + "\n", []string{"p", "{seed}"}, "runs.jsonl:2: no value for placeholder {seed}"},
		{"line too long", `{"a": "` + strings.Repeat("x", maxParamsLineBytes) + `"}` + "\n", nil, "runs.jsonl:1: line is longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if tc.command == nil {
				tc.command = []string{"p"}
			}
			_, err := paramsRuns(t, tc.text, tc.command, expandOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}
