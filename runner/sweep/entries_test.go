package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// goSweep opens spec and returns its runs, or the first error of Open,
// Scan or the walk.
func goSweep(t *testing.T, spec Spec) ([]run.Run, error) {
	t.Helper()
	src, err := spec.Open()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := src.Scan(nil); err != nil {
		return nil, err
	}
	var runs []run.Run
	for r, err := range src.Runs(Shard{}) {
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func TestGoRuns(t *testing.T) {
	two := &pack.Request{CPUs: 2}
	spec := Spec{
		Command: []string{"python3", "train.py", "--out=/ckpt/{lr}"},
		Runs: []Entry{
			{Params: map[string]any{"lr": 0.1, "seed": 1, "model": "mlp"}},
			{Params: map[string]any{"lr": 0.01, "seed": 2, "deep": true}, Request: two},
			{Command: []string{"echo", "a {b}"}},
			{Command: []string{"sh", "-c", "exit 0"}, Params: map[string]any{"kind": "probe"}},
		},
		Request:  pack.Request{CPUs: 1},
		Requests: []string{"seed=1: cpus=4"},
	}
	runs, err := goSweep(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		req := "default"
		if r.Request != nil {
			req = r.Request.String()
		}
		got = append(got, strings.Join(r.Args, "|")+" @"+r.Origin+" name="+r.Name+" params="+string(r.Params)+" "+req)
	}
	want := []string{
		`python3|train.py|--out=/ckpt/0.1|--model=mlp|--seed=1 @runs[0] name=lr=0.1,model=mlp,seed=1 params={"lr":0.1,"model":"mlp","seed":1} gpus=0 cpus=4`,
		`python3|train.py|--out=/ckpt/0.01|--deep=true|--seed=2 @runs[1] name=deep=true,lr=0.01,seed=2 params={"deep":true,"lr":0.01,"seed":2} gpus=0 cpus=2`,
		`echo|a {b} @runs[2] name=echo_a_b params= default`,
		`sh|-c|exit 0 @runs[3] name=kind=probe params={"kind":"probe"} default`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Each run has its request as it was given: a value the caller
	// changes later, or shares between runs, changes no run's.
	two.CPUs = 8
	if runs[1].Request.CPUs != 2 || runs[1].Request == two {
		t.Errorf("runs[1] asks for %v after the caller changed its value, want cpus=2", runs[1].Request)
	}

	// A slice that grew keeps the IDs of the runs it had: a resume
	// skips them.
	grown := spec
	grown.Runs = append([]Entry{{Params: map[string]any{"lr": 0.5, "seed": 9}}}, spec.Runs...)
	again, err := goSweep(t, grown)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if again[i+1].ID != r.ID {
			t.Errorf("run %d: ID %s, after one was added before it %s", i, r.ID, again[i+1].ID)
		}
	}
	if src, _ := grown.Open(); src.Definition().Kind != KindRuns || src.Definition().Label() != "train" {
		t.Errorf("definition %+v, label %q; want kind runs, label train", src.Definition(), src.Definition().Label())
	}
}

func TestGoRunsErrors(t *testing.T) {
	tests := []struct {
		description string
		spec        Spec
		want        string
	}{
		{"no runs", Spec{Runs: []Entry{}}, "runs: no runs"},
		{"runs and a task file", Spec{Runs: []Entry{{Command: []string{"true"}}}, TaskFile: "tasks.txt"}, "exclude each other"},
		{"no command anywhere", Spec{Runs: []Entry{{Command: []string{"true"}}, {Params: map[string]any{"a": 1}}}}, "runs[1]: no command"},
		{"a placeholder without a value", Spec{Command: []string{"prog", "{lr}"}, Runs: []Entry{{Params: map[string]any{"seed": 1}}}}, "runs[0]: no value for placeholder {lr}"},
		{"a bad key", Spec{Command: []string{"prog"}, Runs: []Entry{{Params: map[string]any{"a=b": 1}}}}, `runs[0]: key "a=b"`},
		{"a NUL in a value", Spec{Command: []string{"prog"}, Runs: []Entry{{Params: map[string]any{"a": "x\x00y"}}}}, "runs[0]: a: value contains a NUL byte"},
		{"a value JSON cannot hold", Spec{Command: []string{"prog"}, Runs: []Entry{{Params: map[string]any{"f": func() {}}}}}, "runs[0]: f: json"},
		{"a bad request", Spec{Runs: []Entry{{Command: []string{"true"}, Request: &pack.Request{CPUs: -1}}}}, "runs[0]: "},
		{"an empty program", Spec{Runs: []Entry{{Command: []string{""}}}}, "runs[0]: "},
		{"a rule no run matches", Spec{Command: []string{"prog"}, Runs: []Entry{{Params: map[string]any{"a": 1}}}, Requests: []string{"a=2: cpus=2"}}, "matches no run"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := goSweep(t, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
