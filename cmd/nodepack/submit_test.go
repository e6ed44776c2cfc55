package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/submit"
)

var updateSubmit = flag.Bool("update-submit", false, "rewrite testdata/submit/*.sh from nodepack submit --dry-run")

// TestSubmitDryRunGolden is the golden scripts: nodepack submit
// --dry-run for Slurm, Grid Engine and PBS, as a user types it, prints
// the job script and submits nothing.
func TestSubmitDryRunGolden(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, "tasks.txt", "python train.py --seed=1\npython train.py --seed=2\n#nodepack gpus=2\npython train.py --seed=3 --big\n")
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"slurm.sh", []string{"--slurm", "--nodes", "3", "--time", "4h", "--gpus-per-node", "4", "--partition", "gpu", "--extra", "--constraint=a100"}},
		{"sge.sh", []string{"--sge", "--runs-per-node", "1", "--nodes", "2", "--cpus-per-node", "16", "--gpus-per-node", "2", "--time", "90m", "--mem", "64GiB"}},
		{"pbs.sh", []string{"--pbs", "--nodes", "2", "--time", "1:30:00", "--queue", "gpu", "--gpus-per-node", "4", "--account", "proj1"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			args := append([]string{"submit", "--dry-run", "--nodepack", "/opt/nodepack/bin/nodepack", "-o", "/shared/sweeps/seeds"}, tc.args...)
			args = append(args, "--", "--runs-per-gpu", "2", "tasks.txt")
			code, stdout, stderr := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("nodepack %q = %d: %s", args, code, stderr)
			}
			got := strings.ReplaceAll(stdout, dir, "/home/me/sweeps")
			path := filepath.Join("testdata", "submit", tc.golden)
			if *updateSubmit {
				os.WriteFile(filepath.Join(origWD, path), []byte(got), 0o644)
			}
			want, err := os.ReadFile(filepath.Join(origWD, path))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("nodepack %q printed another script than %s (-update-submit rewrites it):\n%s", args, path, got)
			}
			if _, err := os.Stat("/shared/sweeps/seeds"); err == nil {
				t.Error("--dry-run made the output directory")
			}
		})
	}
}

// origWD is the package's directory, where testdata is.
var origWD, _ = os.Getwd()

// TestSubmitRefuses: bad input is exit 2 with one line, and nothing is
// written or submitted.
func TestSubmitRefuses(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, "tasks.txt", "echo one\n#nodepack gpus=2\necho two\n")
	writeFile(t, dir, "empty.txt", "# nothing\n")
	writeFile(t, dir, "bad.txt", "echo 'unclosed\n")
	writeFile(t, dir, "gpumem.txt", "#nodepack gpu_mem=100GiB\necho big\n")
	for _, tc := range []struct {
		description string
		args        []string
		want        string
	}{
		{"no node count", []string{"--slurm", "--", "tasks.txt"}, "give --nodes N"},
		{"no run arguments", []string{"--slurm", "--nodes", "2"}, "want run's arguments after --"},
		{"run arguments without --", []string{"--slurm", "--nodes", "2", "tasks.txt"}, "want run's arguments after --"},
		{"two schedulers", []string{"--slurm", "--sge", "--nodes", "2", "--", "tasks.txt"}, "give one of --slurm, --sge and --pbs"},
		{"a request that never fits the node asked for", []string{"--slurm", "--nodes", "2", "--", "tasks.txt"}, "tasks.txt:3: gpus=2"},
		{"more GPUs than the node asked for", []string{"--slurm", "--nodes", "2", "--gpus-per-node", "1", "--", "tasks.txt"}, "on the node each task asks for: 1 GPU"},
		{"run's own output", []string{"--slurm", "--nodes", "2", "--gpus-per-node", "2", "--", "-o", "x", "tasks.txt"}, "run's --output: submit chooses it"},
		{"run's own shard", []string{"--slurm", "--nodes", "2", "--gpus-per-node", "2", "--", "--shard", "0/2", "tasks.txt"}, "run's --shard"},
		{"a bad time", []string{"--slurm", "--nodes", "2", "--time", "soon", "--", "tasks.txt"}, "--time: time \"soon\""},
		{"a bad memory size", []string{"--slurm", "--nodes", "2", "--mem", "lots", "--", "tasks.txt"}, "--mem \"lots\""},
		{"partition and queue", []string{"--slurm", "--nodes", "2", "--partition", "a", "--queue", "b", "--", "tasks.txt"}, "give one"},
		{"a source without runs", []string{"--slurm", "--nodes", "2", "--", "empty.txt"}, "empty.txt: no commands"},
		{"a line bash cannot parse", []string{"--slurm", "--nodes", "2", "--", "bad.txt"}, "bad.txt:1"},
		{"a task file that is not there", []string{"--slurm", "--nodes", "2", "--", "missing.txt"}, "missing.txt"},
		{"a GPU memory request on nodes whose GPU memory is not said", []string{"--slurm", "--nodes", "2", "--gpus-per-node", "2", "--", "gpumem.txt"}, "--gpu-memory says each GPU's memory"},
		{"a GPU memory request larger than the GPUs", []string{"--slurm", "--nodes", "2", "--gpus-per-node", "2", "--gpu-memory", "80GiB", "--", "gpumem.txt"}, "at most 76GiB"},
		{"an output path a directive cannot name", []string{"--slurm", "--nodes", "2", "--gpus-per-node", "2", "-o", "my sweep", "--", "tasks.txt"}, "cannot name a path"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"submit"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
			t.Errorf("%s: nodepack submit %q = %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.description, tc.args, code, stdout, stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("refused submissions wrote %d entries in the directory, want only the 4 task files", len(entries))
	}
}

// fakeScheduler puts stand-ins for sbatch and squeue first in PATH: sbatch
// prints the next job id and logs the script it was given; squeue prints
// the file queue.txt of dir (the lines squeue -h -r -o '%F|%K|%T|%N'
// prints).
func fakeScheduler(t *testing.T, dir string) {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	writeFile(t, bin, "sbatch", `#!/bin/sh
n=$(cat "$(dirname "$0")/next" 2>/dev/null || echo 100); echo $((n + 1)) > "$(dirname "$0")/next"
echo "$@" >> "$(dirname "$0")/sbatch.log"
echo "$n"`)
	writeFile(t, bin, "squeue", `#!/bin/sh
cat "$(dirname "$0")/queue.txt" 2>/dev/null; exit 0`)
	os.Chmod(filepath.Join(bin, "sbatch"), 0o755)
	os.Chmod(filepath.Join(bin, "squeue"), 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestSubmitThenResubmit: submit --static records the job and its script;
// status shows the scheduler's view; resubmit refuses while a task is
// queued and then submits exactly the shards with runs left, as one new
// array.
func TestSubmitThenResubmit(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	var lines []string
	for i := range 6 {
		lines = append(lines, "echo run "+string(rune('a'+i)))
	}
	writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\n")
	out := filepath.Join(dir, "sweep")
	code, stdout, stderr := runCLI(t, "submit", "--slurm", "--static", "--nodes", "3", "-o", out, "--", "tasks.txt")
	if code != exitOK || !strings.Contains(stderr, "job 100 (slurm): 3 array tasks of 3 shards") || !strings.Contains(stdout, "#SBATCH --array=0-2\n") {
		t.Fatalf("submit = %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "nodepack status "+out) {
		t.Errorf("submit does not say how to watch it:\n%s", stderr)
	}
	script, err := os.ReadFile(filepath.Join(out, "jobs", "submit-1.sh"))
	if err != nil || string(script) != stdout {
		t.Errorf("the script in jobs/submit-1.sh is not the one printed: %v", err)
	}
	recs, err := submit.Read(out)
	if err != nil || len(recs) != 1 || recs[0].JobID != "100" || recs[0].Runs != 6 || recs[0].Job.Shards != 3 {
		t.Fatalf("records: %+v, %v", recs, err)
	}
	// A control character in a run's argument reaches the script as it is
	// and the terminal escaped.
	code, stdout, _ = runCLI(t, "submit", "--slurm", "--nodes", "1", "--dry-run", "--", "--env", "X=a\x1b[2Jb", "tasks.txt")
	if code != exitOK || strings.Contains(stdout, "\x1b") || !strings.Contains(stdout, `'X=a\x1b[2Jb'`) {
		t.Errorf("submit --dry-run with a control character = %d:\n%q", code, stdout)
	}
	// A second submit of the same directory is a resubmission.
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--static", "--nodes", "3", "-o", out, "--", "tasks.txt"); code != exitUsage || !strings.Contains(stderr, "nodepack resubmit") {
		t.Errorf("a second submit = %d: %s", code, stderr)
	}

	// Submitted, nothing started: every run pending, in a whole document.
	writeFile(t, filepath.Join(dir, "bin"), "queue.txt", "100|0|PENDING|\n100|1|PENDING|\n100|2|PENDING|\n")
	code, stdout, _ = runCLI(t, "status", "--json", out)
	var fresh struct {
		Format string         `json:"format"`
		Total  *int           `json:"total"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(stdout), &fresh); err != nil || code != exitOK || fresh.Format != "nodepack.status/v1" || fresh.Total == nil || *fresh.Total != 6 || fresh.Counts["pending"] != 6 {
		t.Errorf("status --json before any task started = %d, %v:\n%s\nwant format nodepack.status/v1, total 6, 6 pending", code, err, stdout)
	}

	// Task 0 runs its shard (here, as the array task would), task 1 is
	// still running, task 2 never started.
	if code, _, stderr := runCLI(t, "run", "-q", "--shard", "0/3", "-o", out, "tasks.txt"); code != exitOK {
		t.Fatalf("shard 0: %d %s", code, stderr)
	}
	writeFile(t, filepath.Join(dir, "bin"), "queue.txt", "100|1|RUNNING|node7\n")
	code, stdout, _ = runCLI(t, "status", "--json", out)
	var doc struct {
		Counts    map[string]int `json:"counts"`
		Scheduler submit.View    `json:"scheduler"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != exitOK {
		t.Fatalf("status --json = %d, %v\n%s", code, err, stdout)
	}
	states := []string{}
	for _, s := range doc.Scheduler.Shards {
		states = append(states, s.State)
	}
	if !slices.Equal(states, []string{"ended", "running", "not started"}) || doc.Counts["succeeded"] != 2 || doc.Counts["pending"] != 4 {
		t.Errorf("status: shards %v, counts %v; want ended, running, not started and 2 succeeded, 4 pending (the shards not started count)", states, doc.Counts)
	}
	_, text, _ := runCLI(t, "status", out)
	if !strings.Contains(text, "slurm: job 100 (shards 0-2): 1 running, 1 ended, 1 not started") || !strings.Contains(text, "shard 1: job 100 task 1 running on node7") {
		t.Errorf("status text:\n%s", text)
	}

	if code, _, stderr := runCLI(t, "resubmit", out); code != exitUsage || !strings.Contains(stderr, "shard 1 of "+out+" is still in the queue, running (job 100)") {
		t.Errorf("resubmit while a task runs = %d: %s", code, stderr)
	}
	// The queue is empty: task 1 died without an end record (its ledger
	// has none), task 2 never started.
	writeFile(t, filepath.Join(dir, "bin"), "queue.txt", "")
	code, stdout, stderr = runCLI(t, "resubmit", "--remaining", "--nodes", "1", out)
	if code != exitOK || !strings.Contains(stdout, "shards=(1 2)") && !strings.Contains(stdout, "shard=$((1 + SLURM_ARRAY_TASK_ID))") || !strings.Contains(stdout, "#SBATCH --array=0-1%1") {
		t.Fatalf("resubmit = %d\n%s\n%s", code, stdout, stderr)
	}
	recs, _ = submit.Read(out)
	if len(recs) != 2 || recs[1].JobID != "101" || !slices.Equal(recs[1].Job.Indices, []int{1, 2}) || !strings.HasSuffix(recs[1].Script, "submit-2.sh") {
		t.Errorf("the resubmission's record: %+v", recs[len(recs)-1])
	}
	// Every shard done: nothing is left, nothing submitted.
	for _, shard := range []string{"1/3", "2/3"} {
		if code, _, stderr := runCLI(t, "run", "-q", "--shard", shard, "-o", out, "tasks.txt"); code != exitOK {
			t.Fatalf("shard %s: %d %s", shard, code, stderr)
		}
	}
	code, stdout, stderr = runCLI(t, "resubmit", out)
	if code != exitOK || stdout != "" || !strings.Contains(stderr, "nothing left") {
		t.Errorf("resubmit of a finished sweep = %d\n%s\n%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "bin", "sbatch.log")); strings.Count(string(b), "\n") != 2 {
		t.Errorf("sbatch ran %d times, want 2:\n%s", strings.Count(string(b), "\n"), b)
	}
	// The task file grew by a run (index 6: shard 0's): that is left, and
	// resubmit says so, rather than "nothing left".
	writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\necho run g\n")
	code, stdout, stderr = runCLI(t, "resubmit", "--dry-run", out)
	if code != exitOK || !strings.Contains(stdout, "# Written by nodepack submit: shard 0 of 3") {
		t.Errorf("resubmit after the task file grew = %d\n%s\n%s\nwant shard 0, which has the new run", code, stdout, stderr)
	}
	// A changed task file is another sweep: refused before submitting.
	writeFile(t, dir, "tasks.txt", "echo another\n")
	if code, _, stderr := runCLI(t, "resubmit", "--retry-failed", out); code != exitUsage || !strings.Contains(stderr, "holds another sweep") {
		t.Errorf("resubmit of a changed sweep = %d: %s", code, stderr)
	}
}

// TestSubmitWait: --wait returns once the scheduler no longer lists the
// job's tasks (here after three answers that one runs), then prints the
// sweep's status; a task that never started leaves runs: exit 1.
func TestSubmitWait(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	bin := filepath.Join(dir, "bin")
	writeFile(t, bin, "squeue", `#!/bin/sh
n=$(cat "$(dirname "$0")/asked" 2>/dev/null || echo 0); echo $((n + 1)) > "$(dirname "$0")/asked"
[ "$n" -lt 3 ] && echo "100|0|RUNNING|node1"; exit 0`)
	os.Chmod(filepath.Join(bin, "squeue"), 0o755)
	defer func(d time.Duration) { waitInterval = d }(waitInterval)
	waitInterval = time.Millisecond
	writeFile(t, dir, "tasks.txt", "echo one\n")
	code, stdout, stderr := runCLI(t, "submit", "--slurm", "--nodes", "1", "--wait", "-o", "w", "--", "tasks.txt")
	asked, _ := os.ReadFile(filepath.Join(bin, "asked"))
	if code != exitFailed || strings.TrimSpace(string(asked)) != "5" || !strings.Contains(stdout, "slurm: job 100 (pool task 0): 1 not started") || !strings.Contains(stderr, "the job ended with runs left") {
		t.Errorf("submit --wait = %d after asking %s times\n%s\n%s", code, asked, stdout, stderr)
	}
}

// TestSubmitWhereTheSchedulerDoesNotAnswer: sbatch installed where no
// Slurm answers (a workstation with slurm-client): submit --check says so
// (exit 1), and submit refuses before it writes anything, with one line;
// --check finds the scheduler that answers, and exit 2 when none is
// installed.
func TestSubmitWhereTheSchedulerDoesNotAnswer(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, "tasks.txt", "echo one\necho two\n")
	fakeCommands(t, map[string]string{
		"sbatch": `echo "sbatch: error: Could not establish a configuration source" >&2; exit 1`,
		"squeue": `echo "squeue: error: Could not establish a configuration source" >&2; exit 1`,
	})
	code, stdout, stderr := runCLI(t, "submit", "--check")
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "Slurm does not answer here: squeue: exit status 1: squeue: error: Could not establish a configuration source") {
		t.Errorf("--check: exit %d, %q %q; want 1 and why", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "submit", "--slurm", "--nodes", "2", "-o", "out", "--", "tasks.txt")
	if code != exitUsage || strings.Count(stderr, "\n") > 4 || !strings.Contains(stderr, "nodepack submit: Slurm does not answer here") || !strings.Contains(stderr, "nothing was submitted") {
		t.Errorf("submit: exit %d, want 2 and the reason:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a submission Slurm never took wrote its output directory")
	}
	fakeScheduler(t, dir) // a Slurm that answers
	if code, stdout, _ := runCLI(t, "submit", "--check"); code != exitOK || stdout != "Slurm answers here\n" {
		t.Errorf("--check with Slurm answering: exit %d, %q", code, stdout)
	}
	t.Setenv("PATH", t.TempDir()) // nothing installed
	if code, _, stderr := runCLI(t, "submit", "--check"); code != exitUsage || !strings.Contains(stderr, "no scheduler found") {
		t.Errorf("--check with no scheduler: exit %d, %q", code, stderr)
	}
}

// TestSubmitAsksForWholeNodes: a job that names no CPUs asks for whole
// nodes, and submit says what each task asks for: --exclusive on Slurm,
// place=excl on PBS, and on Grid Engine, which has no such request, the
// CPUs of its smallest host as qhost reports them.
func TestSubmitAsksForWholeNodes(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, "tasks.txt", "echo one\necho two\n")
	qhost, err := os.ReadFile(filepath.Join(origWD, "../../runner/submit/testdata/qhost.xml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "qhost.xml", string(qhost))
	fakeCommands(t, map[string]string{"qhost": `[ "$*" = "-q -xml" ] && cat qhost.xml`})
	for _, tc := range []struct {
		args       []string
		directives []string
		says       string
	}{
		{[]string{"--slurm", "--gpus-per-node", "4"}, []string{"#SBATCH --exclusive", "#SBATCH --mem=0", "#SBATCH --gres=gpu:4"},
			"each of its 2 array tasks: a whole node, all its CPUs and memory (--exclusive --mem=0), 4 GPUs (--gres=gpu:4), no time limit of its own"},
		{[]string{"--pbs", "--gpus-per-node", "4", "--time", "1h"}, []string{"#PBS -l select=1:ngpus=4", "#PBS -l place=excl"},
			"a whole node (-l place=excl), 4 GPUs (ngpus=4), 1h0m0s (-l walltime=01:00:00)"},
		{[]string{"--sge", "--gpus-per-node", "4"}, []string{"#$ -pe smp 2", "#$ -binding linear:2", "#$ -l gpu=4"},
			"each task asks for 2 CPUs (qhost: the CPUs of host vm, the fewest of any)"},
	} {
		args := append(append([]string{"submit", "--dry-run", "--nodes", "2"}, tc.args...), "--", "tasks.txt")
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK || !strings.Contains(stderr, tc.says) {
			t.Errorf("%q: exit %d, want 0 and %q:\n%s", args, code, tc.says, stderr)
		}
		for _, d := range tc.directives {
			if !strings.Contains(stdout, d+"\n") {
				t.Errorf("%q: the script lacks %q:\n%s", args, d, stdout)
			}
		}
	}
	t.Setenv("PATH", t.TempDir()) // no qhost to ask
	if code, _, stderr := runCLI(t, "submit", "--dry-run", "--sge", "--nodes", "2", "--", "tasks.txt"); code != exitUsage || !strings.Contains(stderr, "give --cpus-per-node") {
		t.Errorf("Grid Engine without a CPU count or qhost: exit %d, %q", code, stderr)
	}
}

// TestResubmitAfterAnEditedLine: every shard of a sweep submitted with
// --static ran,
// then a line in the middle of the task file was edited: that line is a
// run that never ran (its command changed), so resubmit submits its shard
// (index 4 of 10: shard 0 of 2), never "nothing left", and that shard's
// task runs it.
func TestResubmitAfterAnEditedLine(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf("echo run %d", i))
	}
	writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\n")
	out := filepath.Join(dir, "sweep")
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--static", "--nodes", "2", "-o", out, "--", "tasks.txt"); code != exitOK {
		t.Fatalf("submit: %d %s", code, stderr)
	}
	for _, shard := range []string{"0/2", "1/2"} {
		if code, _, stderr := runCLI(t, "run", "-q", "--shard", shard, "-o", out, "tasks.txt"); code != exitOK {
			t.Fatalf("shard %s: %d %s", shard, code, stderr)
		}
	}
	lines[4] = "echo run four, edited"
	writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\n")
	code, stdout, stderr := runCLI(t, "resubmit", out)
	if code != exitOK || strings.Contains(stderr, "nothing left") || !strings.Contains(stdout, "# Written by nodepack submit: shard 0 of 2") {
		t.Fatalf("resubmit after an edit = %d\n%s\n%s\nwant shard 0 submitted, which has the edited run", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "run", "-q", "--shard", "0/2", "-o", out, "tasks.txt"); code != exitOK || !strings.Contains(stderr, "1 run: 1 succeeded") {
		t.Errorf("shard 0's task after the edit: exit %d, want the edited run run:\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "resubmit", out); code != exitOK || !strings.Contains(stderr, "nothing left") {
		t.Errorf("resubmit once the edited run ran = %d: %s", code, stderr)
	}
}

// TestSubmitPool: submit makes the array's tasks one shared pool by
// default (nodepack run --pool auto, no shard); a second submit into the
// same directory, or --add N, adds tasks to it while it runs, and one of
// another sweep is refused in one line; status names each task's ledger
// by its job and array task; resubmit refuses while a task is queued,
// then submits new tasks for what is left, no more than runs are left,
// and nothing once every run is done.
func TestSubmitPool(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	writeFile(t, dir, "tasks.txt", "echo a\necho b\necho c\necho d\n")
	out := filepath.Join(dir, "sweep")
	code, stdout, stderr := runCLI(t, "submit", "--slurm", "--nodes", "2", "-o", out, "--", "tasks.txt")
	if code != exitOK || !strings.Contains(stdout, "--pool auto") || strings.Contains(stdout, "--shard") || !strings.Contains(stderr, "job 100 (slurm): 2 array tasks of the sweep's shared pool") {
		t.Fatalf("submit = %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--add", "1", "-o", out, "--", "tasks.txt"); code != exitOK || !strings.Contains(stderr, "job 101 (slurm): 1 array task of the sweep's shared pool") {
		t.Fatalf("submit --add 1 = %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--nodes", "1", "-o", out, "--", "tasks.txt"); code != exitOK || !strings.Contains(stderr, "job 102") {
		t.Fatalf("a second submit = %d: %s", code, stderr)
	}
	writeFile(t, dir, "other.txt", "echo other\n")
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--nodes", "1", "-o", out, "--", "other.txt"); code != exitUsage || !strings.Contains(stderr, "holds another sweep") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("a submit of another sweep into the pool = %d: %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--add", "1", "-o", filepath.Join(dir, "none"), "--", "tasks.txt"); code != exitUsage || !strings.Contains(stderr, "has no pool submitted before") {
		t.Errorf("--add without a pool = %d: %q", code, stderr)
	}
	recs, _ := submit.Read(out)
	if len(recs) != 3 || !recs[0].Job.Pool || recs[0].Sweep == "" || recs[2].Sweep != recs[0].Sweep {
		t.Fatalf("records: %+v", recs)
	}
	// Task 0 of job 100 runs the whole sweep (as the array task would:
	// its name is the job's and the array task's); 100_1 is running.
	if code, _, stderr := runCLI(t, "run", "-q", "--pool", "100_0", "--lease", "3s", "--grace", "300ms", "-o", out, "tasks.txt"); code != exitOK {
		t.Fatalf("task 100_0: %d %s", code, stderr)
	}
	writeFile(t, filepath.Join(dir, "bin"), "queue.txt", "100|1|RUNNING|node7\n")
	_, text, _ := runCLI(t, "status", out)
	if !strings.Contains(text, "4 runs: 4 succeeded") || !strings.Contains(text, "slurm: job 100 (pool tasks 0-1): 1 running, 1 ended; job 101 (pool task 0): 1 not started") || !strings.Contains(text, "job 100 task 1 running on node7") {
		t.Errorf("status text:\n%s", text)
	}
	if code, _, stderr := runCLI(t, "resubmit", out); code != exitUsage || !strings.Contains(stderr, "task 1 of job 100 of "+out+"'s pool is still in the queue, running") {
		t.Errorf("resubmit while a task runs = %d: %s", code, stderr)
	}
	writeFile(t, filepath.Join(dir, "bin"), "queue.txt", "")
	if code, _, stderr := runCLI(t, "resubmit", out); code != exitOK || !strings.Contains(stderr, "nothing left") {
		t.Errorf("resubmit of a finished pool = %d: %s", code, stderr)
	}
	// The task file grew by 1 run: resubmit submits 1 task, not 2.
	writeFile(t, dir, "tasks.txt", "echo a\necho b\necho c\necho d\necho e\n")
	code, stdout, stderr = runCLI(t, "resubmit", "--dry-run", out)
	if code != exitOK || !strings.Contains(stdout, "#SBATCH --array=0-0\n") || !strings.Contains(stdout, "--pool auto") {
		t.Errorf("resubmit of a pool with 1 run left = %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestResubmitPoolAfterAnEdit: a line of a pool's task file edited after
// every run succeeded: resubmit submits a task for the edited line's run
// (never "nothing left"), and that task, and any task started after the
// edit, runs it: the old line's run is not taken for the new one's.
func TestResubmitPoolAfterAnEdit(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	writeFile(t, dir, "tasks.txt", "echo a\necho b\necho c\necho d\n")
	out := filepath.Join(dir, "sweep")
	if code, _, stderr := runCLI(t, "submit", "--slurm", "--nodes", "2", "-o", out, "--", "tasks.txt"); code != exitOK {
		t.Fatalf("submit = %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "run", "-q", "--pool", "100_0", "--lease", "3s", "--grace", "300ms", "-o", out, "tasks.txt"); code != exitOK {
		t.Fatalf("task 100_0: %d %s", code, stderr)
	}
	writeFile(t, dir, "tasks.txt", "echo a\necho B\necho c\necho d\n")
	code, stdout, stderr := runCLI(t, "resubmit", out)
	if code != exitOK || strings.Contains(stderr, "nothing left") || !strings.Contains(stderr, "1 array task") {
		t.Fatalf("resubmit after an edit = %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "run", "--pool", "101_0", "--lease", "3s", "--grace", "300ms", "-o", out, "tasks.txt")
	if code != exitOK {
		t.Fatalf("the new task: %d %s", code, stderr)
	}
	// The readers count the sweep as it is now: the old line's run left it.
	code, runs, _ := runCLI(t, "status", "--runs", out)
	if code != exitOK || !strings.Contains(runs, "/echo_B-") || strings.Contains(runs, "/echo_b-") || strings.Count(runs, ",succeeded,") != 4 {
		t.Errorf("status --runs after the edited line's task (%d):\n%s\n%s", code, runs, stderr)
	}
	if code, _, stderr := runCLI(t, "resubmit", out); code != exitOK || !strings.Contains(stderr, "nothing left") {
		t.Errorf("resubmit once the edited line ran = %d: %s", code, stderr)
	}
}

// TestSubmitNamesInheritedVars: submit --check and submit name, one line
// each, the variables of the calling shell that change the job.
func TestSubmitNamesInheritedVars(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	t.Setenv("SBATCH_PARTITION", "debug")
	t.Setenv("SLURM_CPU_BIND", "map_cpu:0")
	code, _, stderr := runCLI(t, "submit", "--slurm", "--check")
	if code != exitOK || strings.Count(stderr, "warning: SBATCH_PARTITION=debug in this shell: sbatch reads it as an option") != 1 ||
		strings.Count(stderr, "warning: SLURM_CPU_BIND=map_cpu:0 in this shell:") != 1 {
		t.Errorf("submit --check = %d:\n%s", code, stderr)
	}
	writeFile(t, dir, "tasks.txt", "echo a\n")
	code, _, stderr = runCLI(t, "submit", "--slurm", "--nodes", "1", "--dry-run", "-o", "sweep", "--", "tasks.txt")
	if code != exitOK || strings.Count(stderr, " in this shell: ") != 2 {
		t.Errorf("submit --dry-run = %d:\n%s", code, stderr)
	}
}
