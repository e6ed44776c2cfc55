package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"

	"github.com/nodepack/nodepack/runner/run"
)

// TestRunNamesAndParams: every source gives each run a readable Name,
// shared by its reps, and its parameters as a typed JSON object.
func TestRunNamesAndParams(t *testing.T) {
	grid := gridRuns(t, "gpu: -1\nlr: [0.1, 1e-3]\nhex: 0x1f\nname: \"1\"\namp: [true]\nepoch: !!python/tuple [0.5, 1.0, 0.5]\n",
		[]string{"p"}, expandOptions{Reps: 2})
	sweep, err := parseHydra([]string{"python", "train.py", "model=a,b", "+iteration=range(2)", "lr=0.1", "flag=True", "s='x,y'"})
	if err != nil {
		t.Fatal(err)
	}
	hydra := collect(t, sweep, expandOptions{})
	params, err := readParams(strings.NewReader(`{"lr": 0.1, "layers": [64, 32], "note": "a/b"}`+"\n"), "runs.jsonl", []string{"p"}, expandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var jsonl []run.Run
	for r, err := range params {
		if err != nil {
			t.Fatal(err)
		}
		jsonl = append(jsonl, r)
	}
	tasks := shellRuns(t, "python train.py --seed=3 > out.txt\n")
	tests := []struct {
		description string
		run         run.Run
		name        string
		params      string
	}{
		{"grid: swept keys name it, all keys typed", grid[0], "lr=0.1,amp=true,epoch=0.5", `{"gpu":-1,"lr":0.1,"hex":31,"name":"1","amp":true,"epoch":0.5}`},
		{"grid: the second rep has the same name", grid[1], "lr=0.1,amp=true,epoch=0.5", `{"gpu":-1,"lr":0.1,"hex":31,"name":"1","amp":true,"epoch":0.5}`},
		{"grid: a float as written", grid[2], "lr=1e-3,amp=true,epoch=0.5", `{"gpu":-1,"lr":0.001,"hex":31,"name":"1","amp":true,"epoch":0.5}`},
		{"hydra: swept overrides name it, every override typed", hydra[1], "model=a,iteration=1", `{"model":"a","iteration":1,"lr":0.1,"flag":true,"s":"x,y"}`},
		{"params: every key", jsonl[0], "lr=0.1,layers=_64,32_,note=a_b", `{"lr":0.1,"layers":[64,32],"note":"a/b"}`},
		{"task file: the command, no params", tasks[0], "python_train.py_--seed=3_out.txt", ""},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if tc.run.Name != tc.name || string(tc.run.Params) != tc.params {
				t.Errorf("name %q params %s; want %q %s", tc.run.Name, tc.run.Params, tc.name, tc.params)
			}
			if dir := run.Dir("/out", tc.run); !strings.HasSuffix(dir, "-"+tc.run.ID) && tc.name != "" {
				t.Errorf("RunDir %s does not end in the run's id", dir)
			}
		})
	}
	if got := sweep.Template(); !slices.Equal(got, []string{"python", "train.py", "model={sweep}", "+iteration={sweep}", "lr=0.1", "flag=True", "s='x,y'"}) {
		t.Errorf("Template = %q", got)
	}
}

func shellRuns(t *testing.T, tasks string) []run.Run {
	t.Helper()
	var runs []run.Run
	for r, err := range readTaskFile(strings.NewReader(tasks), "tasks.txt", pack.Request{}) {
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}
