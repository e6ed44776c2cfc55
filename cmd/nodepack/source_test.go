package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/sweep"
)

// runsDocument is what the dry-run document decodes to in tests.
type runsDocument struct {
	runner.RunsHeader
	Runs []runner.RunDoc `json:"runs"`
}

// dryRun runs nodepack run --dry-run --json with args and decodes the
// document.
func dryRunDoc(t *testing.T, args ...string) runsDocument {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"run", "--gpus", "none", "--dry-run", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("nodepack run %q = %d: %s", args, code, stderr)
	}
	var doc runsDocument
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("dry-run document: %v\n%s", err, stdout)
	}
	if doc.Schema != "nodepack.runs/v1" {
		t.Errorf("schema %q", doc.Schema)
	}
	return doc
}

func argvsOf(doc runsDocument) []string {
	var out []string
	for _, r := range doc.Runs {
		out = append(out, strings.Join(r.Argv, " "))
	}
	return out
}

// TestRunSweepClusterduck: the shell turns +iteration="range(2)" into
// +iteration=range(2); nodepack gives exactly Hydra's four runs.
func TestRunSweepClusterduck(t *testing.T) {
	doc := dryRunDoc(t, "--sweep", "--", "python", "train.py", "model=convnet,transformer", "+iteration=range(2)")
	want := []string{
		"python train.py model=convnet +iteration=0",
		"python train.py model=convnet +iteration=1",
		"python train.py model=transformer +iteration=0",
		"python train.py model=transformer +iteration=1",
	}
	if got := argvsOf(doc); !slices.Equal(got, want) || doc.Total != 4 || doc.Source.Kind != "sweep" {
		t.Errorf("runs %q (total %d, kind %q), want %q", got, doc.Total, doc.Source.Kind, want)
	}
}

// TestRunGridMLFramework: mlframework's grid gives exactly six runs.
func TestRunGridMLFramework(t *testing.T) {
	grid := writeFile(t, t.TempDir(), "params.yml", "gpu: -1\nbatchsize: [100, 500]\nepoch: !!python/tuple [5,20,5]\n")
	doc := dryRunDoc(t, "--grid", grid, "--", "python", "train_mnist.py")
	var want []string
	for _, bs := range []string{"100", "500"} {
		for _, ep := range []string{"5", "10", "15"} {
			want = append(want, "python train_mnist.py --gpu=-1 --batchsize="+bs+" --epoch="+ep)
		}
	}
	if got := argvsOf(doc); !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q", got, want)
	}
}

// TestRunParamsWithoutShell runs for real, in a temporary directory, a
// params value that a shell would split and execute: it must arrive as one
// argv element and nothing named pwned may appear.
func TestRunParamsWithoutShell(t *testing.T) {
	dir := t.TempDir()
	value := "a b;$(touch pwned) `touch pwned` * \"q\" 'q'\nline2"
	line, _ := json.Marshal(map[string]string{"msg": value})
	writeFile(t, dir, "runs.jsonl", string(line)+"\n")
	cmd := nodepackCommand(t, nil, "run", "--gpus", "none", "-o", "out", "--params", "runs.jsonl", "--",
		"printf", "[%s]", "{msg}")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nodepack run: %v\n%s", err, out)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "out", "runs", "*", "stdout.log"))
	if len(logs) != 1 {
		t.Fatalf("%d run logs, want 1", len(logs))
	}
	got, _ := os.ReadFile(logs[0])
	if string(got) != "["+value+"]" {
		t.Errorf("the program got %q, want one argument %q", got, "["+value+"]")
	}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if d != nil && d.Name() == "pwned" {
			t.Errorf("%s exists: a shell ran the value", path)
		}
		return nil
	})
}

// TestShardAutoSlurmArray: under SLURM_ARRAY_TASK_ID=1 of a 3-task array,
// --shard auto (the default) runs exactly its third of the sweep, for real,
// and the three shards together hold every run once.
func TestShardAutoSlurmArray(t *testing.T) {
	dir := t.TempDir()
	grid := writeFile(t, dir, "params.yml", "a: [1, 2, 3, 4]\nb: [x, y]\n")
	whole := dryRunDoc(t, "--shard", "none", "--grid", grid, "--", "echo")
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("SLURM_ARRAY_TASK_COUNT", "3")
	t.Setenv("SLURM_ARRAY_TASK_MIN", "0")
	t.Setenv("SLURM_ARRAY_TASK_MAX", "2")
	seen := map[string]int{}
	for task := range 3 {
		t.Setenv("SLURM_ARRAY_TASK_ID", string(rune('0'+task)))
		doc := dryRunDoc(t, "--grid", grid, "--", "echo")
		if doc.Shard.Index != task || doc.Shard.Count != 3 || len(doc.Runs) != (sweep.Shard{Index: task, Count: 3}).Size(8) {
			t.Errorf("task %d: shard %+v with %d runs", task, doc.Shard, len(doc.Runs))
		}
		for _, r := range doc.Runs {
			seen[r.ID]++
			if r.Index%3 != task {
				t.Errorf("task %d runs run %d", task, r.Index)
			}
		}
	}
	for _, r := range whole.Runs {
		if seen[r.ID] != 1 {
			t.Errorf("run %d (%s) is in %d shards, want 1", r.Index, r.ID, seen[r.ID])
		}
	}
	if len(seen) != len(whole.Runs) {
		t.Errorf("the shards hold %d runs, the sweep %d", len(seen), len(whole.Runs))
	}

	t.Setenv("SLURM_ARRAY_TASK_ID", "1")
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", out, "--grid", grid, "--", "echo", "{index}")
	if code != exitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	var ran []string
	logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
	for _, log := range logs {
		b, _ := os.ReadFile(log)
		ran = append(ran, strings.Fields(string(b))[0])
	}
	slices.Sort(ran)
	if !slices.Equal(ran, []string{"1", "4", "7"}) {
		t.Errorf("array task 1 ran runs %q, want 1, 4, 7", ran)
	}
}

func TestRunRepsAndTemplates(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "echo a\necho b\n")
	once := dryRunDoc(t, tasks)
	twice := dryRunDoc(t, "--reps", "2", tasks)
	if len(twice.Runs) != 4 || twice.Runs[0].ID != once.Runs[0].ID || twice.Runs[2].ID != once.Runs[1].ID ||
		!slices.Equal(twice.Runs[1].Env, []string{"NODEPACK_REP=1"}) {
		t.Errorf("--reps 2: %+v; without: %+v", twice.Runs, once.Runs)
	}
	out := filepath.Join(dir, "out")
	doc := dryRunDoc(t, "-o", out, "--sweep", "--", "prog", "a=1,2", "--dir={run_dir}", "--id={run_id}", "--i={index}", "--r={rep}", "{{x}}")
	r := doc.Runs[1]
	want := []string{"prog", "a=2", "--dir=" + filepath.Join(out, "runs", "a=2-"+r.ID), "--id=" + r.ID, "--i=1", "--r=0", "{x}"}
	if !slices.Equal(r.Argv, want) {
		t.Errorf("argv %q, want %q", r.Argv, want)
	}
}

// TestSourceBadInput: every kind of bad input exits 2 with one line naming
// where, and nothing starts.
func TestSourceBadInput(t *testing.T) {
	dir := t.TempDir()
	grid := writeFile(t, dir, "grid.yml", "lr: [0.1, 0.01]\n")
	badGrid := writeFile(t, dir, "bad.yml", "lr: [0.1, 0.01]\nbs:\n")
	badParams := writeFile(t, dir, "bad.jsonl", `{"a": 1}`+"\n"+`{"a": 2,}`+"\n")
	emptyParams := writeFile(t, dir, "empty.jsonl", "\n# nothing\n")
	tasks := writeFile(t, dir, "tasks.txt", "true\n")
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"bad override", []string{"--sweep", "--", "p", "a=range(1,x)"}, `sweep argv[1]:11: range: "x" is not a finite number`},
		{"sweep without command", []string{"--sweep"}, "--sweep needs the command after --"},
		{"bad grid node", []string{"--grid", badGrid, "--", "p"}, "bad.yml:2:4: bs: no value"},
		{"missing grid", []string{"--grid", filepath.Join(dir, "nope.yml"), "--", "p"}, "nope.yml"},
		{"unknown placeholder", []string{"--grid", grid, "--", "p", "--seed={seed}"}, "grid.yml: command argv[1]:8: unknown placeholder {seed}"},
		{"bad params line", []string{"--params", badParams, "--", "p"}, "bad.jsonl:2:"},
		{"empty params", []string{"--params", emptyParams, "--", "p"}, "empty.jsonl: no runs"},
		{"two sources", []string{"--sweep", "--grid", grid, "--", "p"}, "exclude each other"},
		{"bad reps", []string{"--reps", "0", tasks}, "--reps 0"},
		{"bad shard", []string{"--shard", "3/3", tasks}, "--shard: shard 3/3"},
		{"json without dry run", []string{"--json", tasks}, "--json goes with --dry-run"},
		{"run_dir is fine, seed is not", []string{"--sweep", "--", "p", "{run_dir}", "{seed}"}, "unknown placeholder {seed}"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := runCLI(t, append([]string{"run", "--gpus", "none", "-o", out}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line containing %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output directory created although nothing should start")
			}
		})
	}
}

func TestPlanRunsPerShard(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "--gpus", "none", "--parallel", "2", "--runs-per-shard", "4", "--sweep", "--", "p", "a=range(10)")
	if code != exitOK || !strings.Contains(stdout, "runs: 10, by request\n") || !strings.Contains(stdout, "shards: 3 of up to 4 runs; submit sbatch --array=0-2") {
		t.Errorf("plan = %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "plan", "--gpus", "none", "--parallel", "2", "--json", "--runs-per-shard", "8", "--reps", "3", "--sweep", "--", "p", "a=range(10)")
	var doc planDoc
	if err := json.Unmarshal([]byte(stdout), &doc); code != exitOK || err != nil || doc.Runs == nil {
		t.Fatalf("plan --json = %d, %v: %+v\n%s", code, err, doc.Runs, stderr)
	}
	// Every run asks for the plan's request: half the CPUs, whatever this
	// machine has.
	if q := doc.Runs.Requests; len(q) != 1 || q[0].Runs != 30 || q[0].Class != "CPU only" {
		t.Errorf("requests %+v, want all 30 runs CPU only", q)
	}
	doc.Runs.Requests = nil
	if !reflect.DeepEqual(*doc.Runs, runner.RunsPlan{Total: 30, RunsPerShard: 8, Shards: 4, SlurmArray: "0-3"}) {
		t.Errorf("plan --json runs: %+v", doc.Runs)
	}
	if code, _, stderr := runCLI(t, "plan", "--gpus", "none", "--runs-per-shard", "8"); code != exitUsage || !strings.Contains(stderr, "needs the runs") {
		t.Errorf("--runs-per-shard without runs = %d: %s", code, stderr)
	}
}
