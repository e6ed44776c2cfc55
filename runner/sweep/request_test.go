package sweep

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// requestsOf opens spec, scans it, and returns each run's argv (joined by
// spaces) with the request it asks for: its own, else spec.Request.
func requestsOf(t *testing.T, spec Spec) (map[string]string, error) {
	t.Helper()
	src, err := spec.Open()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	got := map[string]string{}
	err = src.Scan(func(run run.Run) error {
		req := spec.Request
		if run.Request != nil {
			req = *run.Request
		}
		got[strings.Join(run.Args, " ")] = req.String()
		return nil
	})
	return got, err
}

// writeIn writes a file of text into dir and returns its path.
func writeIn(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRequestsFromEverySource: a task file's directives, a params line's
// "nodepack" object and --request rules on a sweep, a grid and a params
// file each give runs their own request over the base; what they leave
// out keeps the base's value.
func TestRequestsFromEverySource(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string { return writeIn(t, dir, name, text) }
	base := pack.Request{GPUShare: 250, CPUs: 4}
	tests := []struct {
		description string
		spec        Spec
		want        map[string]string // argv → request
	}{
		{
			description: "task file: a directive holds until the next; #nodepack alone is the base again",
			spec:        Spec{TaskFile: file("tasks.txt", "echo small\n#nodepack gpus=2 cpus=16\necho big1\n\necho big2\n#nodepack gpu_mem=12GiB\necho mem\n#nodepack\necho again\n#nodepacker is a comment\necho comment\n")},
			want: map[string]string{
				"bash -c echo small":   "gpus=0.25 cpus=4",
				"bash -c echo big1":    "gpus=2 cpus=16",
				"bash -c echo big2":    "gpus=2 cpus=16",
				"bash -c echo mem":     "gpu_mem=12GiB cpus=4",
				"bash -c echo again":   "gpus=0.25 cpus=4",
				"bash -c echo comment": "gpus=0.25 cpus=4",
			},
		},
		{
			description: "params: the nodepack object is the request, not a parameter",
			spec: Spec{Params: file("runs.jsonl", `{"lr": 0.1}`+"\n"+`{"lr": 0.2, "nodepack": {"gpus": 2, "mem": "64GiB"}}`+"\n"+`{"nodepack": {"gpus": "1/2"}, "lr": 0.3}`+"\n"),
				Command: []string{"train"}},
			want: map[string]string{
				"train --lr=0.1": "gpus=0.25 cpus=4",
				"train --lr=0.2": "gpus=2 cpus=32 mem=64GiB",
				"train --lr=0.3": "gpus=0.5 cpus=8",
			},
		},
		{
			description: "params: the line's own request wins over a rule",
			spec: Spec{Params: file("runs2.jsonl", `{"lr": 0.1}`+"\n"+`{"lr": 0.2, "nodepack": {"gpus": 1}}`+"\n"),
				Command: []string{"train"}, Requests: []string{"*: gpus=0.5 cpus=1"}},
			want: map[string]string{
				"train --lr=0.1": "gpus=0.5 cpus=1",
				"train --lr=0.2": "gpus=1 cpus=16",
			},
		},
		{
			description: "sweep: the first rule that matches the swept values",
			spec: Spec{Hydra: true, Command: []string{"python", "train.py", "model=small,big", "seed=1,2"},
				Requests: []string{"model=big,seed=2: gpus=4", "model=big: gpus=2 cpus=16"}},
			want: map[string]string{
				"python train.py model=small seed=1": "gpus=0.25 cpus=4",
				"python train.py model=small seed=2": "gpus=0.25 cpus=4",
				"python train.py model=big seed=1":   "gpus=2 cpus=16",
				"python train.py model=big seed=2":   "gpus=4 cpus=64",
			},
		},
		{
			description: "grid: rules match the grid's values as written",
			spec: Spec{Grid: file("grid.yml", "model: [small, big]\nlr: [0.1]\n"), Command: []string{"train"},
				Requests: []string{"model=big: gpus=1", "*: gpu_mem=6GiB cpus=2"}},
			want: map[string]string{
				"train --model=small --lr=0.1": "gpu_mem=6GiB cpus=2",
				"train --model=big --lr=0.1":   "gpus=1 cpus=16",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			tc.spec.Request = base
			got, err := requestsOf(t, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			for argv, want := range tc.want {
				if got[argv] != want {
					t.Errorf("%s: request %q, want %q", argv, got[argv], want)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d runs: %v, want %d", len(got), got, len(tc.want))
			}
		})
	}
}

// TestParamsRequestIsNoParameter: the "nodepack" key changes neither the
// run's ID nor its params, so asking for more GPUs does not make it
// another run.
func TestParamsRequestIsNoParameter(t *testing.T) {
	plain, err := paramsRuns(t, `{"lr": 0.1}`, []string{"train"}, expandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asking, err := paramsRuns(t, `{"lr": 0.1, "nodepack": {"gpus": 2}}`, []string{"train"}, expandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain[0].ID != asking[0].ID || string(plain[0].Params) != string(asking[0].Params) || !slices.Equal(plain[0].Args, asking[0].Args) {
		t.Errorf("with a request: id %s params %s argv %q; without: id %s params %s argv %q",
			asking[0].ID, asking[0].Params, asking[0].Args, plain[0].ID, plain[0].Params, plain[0].Args)
	}
	if asking[0].Request == nil || asking[0].Request.GPUs != 2 {
		t.Errorf("request %v, want gpus=2", asking[0].Request)
	}
}

// TestRequestErrors: a bad request is an error naming where it is, found
// before anything runs.
func TestRequestErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string { return writeIn(t, dir, name, text) }
	tests := []struct {
		description string
		spec        Spec
		want        string
	}{
		{"directive with an unknown key", Spec{TaskFile: file("t1.txt", "echo a\n#nodepack gpu=2\necho b\n")}, "t1.txt:2: #nodepack: "},
		{"directive with a share over one", Spec{TaskFile: file("t2.txt", "#nodepack gpus=1.5\necho b\n")}, "t2.txt:1: #nodepack: "},
		{"rules with a task file", Spec{TaskFile: file("t3.txt", "echo a\n"), Requests: []string{"*: gpus=1"}}, "a task file sets requests with #nodepack lines"},
		{"rule without a colon", Spec{Hydra: true, Command: []string{"train", "a=1,2"}, Requests: []string{"gpus=1"}}, "want MATCH: REQUEST"},
		{"rule that matches nothing", Spec{Hydra: true, Command: []string{"train", "model=a,b"}, Requests: []string{"model=c: gpus=1"}}, "matches no run"},
		{"params request not an object", Spec{Params: file("p1.jsonl", `{"lr": 1, "nodepack": 2}`+"\n"), Command: []string{"train"}}, "p1.jsonl:1: "},
		{"params request with a bad value", Spec{Params: file("p2.jsonl", `{"lr": 1}`+"\n"+`{"nodepack": {"gpus": [1]}}`+"\n"), Command: []string{"train"}}, "p2.jsonl:2: "},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := requestsOf(t, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
