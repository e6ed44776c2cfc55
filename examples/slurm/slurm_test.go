// Package slurm_test runs nodepack under a real Slurm: the example batch
// scripts, submitted with sbatch to the single-node cluster that
// scripts/slurm-local.sh starts. It is skipped unless NODEPACK_SLURM_TESTS=1
// (set by .ci/run after starting Slurm), so go test ./... needs no Slurm.
package slurm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/examples/internal/journey"
)

var (
	repoRoot  string // the repository, from this package's directory
	nodepack  string // nodepack built for these tests
	slurmWait string // scripts/slurm-local.sh, whose wait is the test oracle
)

func TestMain(m *testing.M) {
	if os.Getenv("NODEPACK_SLURM_TESTS") != "1" {
		fmt.Println("skipping the Slurm tests: set NODEPACK_SLURM_TESTS=1 after scripts/slurm-local.sh start")
		os.Exit(m.Run()) // every test skips itself
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		panic(err)
	}
	slurmWait = filepath.Join(repoRoot, "scripts", "slurm-local.sh")
	if os.Getenv("SLURM_CONF") == "" {
		// slurm-local.sh env prints "export SLURM_CONF=PATH".
		out, err := exec.Command(slurmWait, "env").Output()
		if err != nil {
			panic(err)
		}
		_, conf, _ := strings.Cut(strings.TrimSpace(string(out)), "=")
		os.Setenv("SLURM_CONF", conf)
	}
	if nodepack, err = journey.Build(repoRoot); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(filepath.Dir(nodepack))
	os.Exit(code)
}

func needSlurm(t *testing.T) {
	t.Helper()
	if nodepack == "" {
		t.Skip("NODEPACK_SLURM_TESTS is not 1")
	}
}

// submit runs sbatch with args in dir and returns the job id.
func submit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("sbatch", append([]string{"--parsable", "--chdir", dir,
		"--export=ALL,NODEPACK=" + nodepack}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %q: %v\n%s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	return id
}

// wait waits for the job (all array tasks) to end and returns nil only if
// every task COMPLETED; the polling wait of slurm-local.sh is the oracle,
// not sbatch --wait (which returns 0 for cancelled jobs).
func wait(t *testing.T, id string, timeoutSeconds int) error {
	t.Helper()
	out, err := exec.Command(slurmWait, "wait", id, fmt.Sprint(timeoutSeconds)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func jobLog(t *testing.T, path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func writeTasks(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// outputOf returns the output directory nodepack made in dir for job id,
// nodepack-ID-NAME-KEY by default; "" while there is none.
func outputOf(t *testing.T, dir, id string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "nodepack-"+id+"-*"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.IsDir() {
			return m
		}
	}
	return ""
}

// runOutputs returns the stdout.log of every run under out/runs.
func runOutputs(t *testing.T, out string) map[string]string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
	m := map[string]string{}
	for _, l := range logs {
		m[filepath.Base(filepath.Dir(l))] = jobLog(t, l)
	}
	return m
}

// TestFakeGPUs is scenario 1: the example script with --gres=gpu:4 (fake
// GPUs, no driver): nodepack takes the 4 GPUs from CUDA_VISIBLE_DEVICES,
// packs 8 runs at 2 per GPU, each run's environment names only its GPU,
// and every run is pinned to the CPUs its slot was given.
func TestFakeGPUs(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	var lines []string
	for i := range 8 {
		lines = append(lines, fmt.Sprintf(
			"echo %d $CUDA_VISIBLE_DEVICES $NODEPACK_CPUS $(grep Cpus_allowed_list /proc/self/status | cut -f2); sleep 1", i))
	}
	tasks := writeTasks(t, dir, lines...)
	id := submit(t, dir, "--export=ALL,NODEPACK="+nodepack+",TASKS="+tasks, filepath.Join(repoRoot, "examples/slurm/sweep.sbatch"))
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	outputs := runOutputs(t, outputOf(t, dir, id))
	if len(outputs) != 8 {
		t.Fatalf("%d run logs, want 8:\n%s", len(outputs), jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	runsPerGPU := map[string]int{}
	runsPerCPU := map[string]int{}
	for run, out := range outputs {
		f := strings.Fields(out)
		if len(f) != 4 {
			t.Fatalf("run %s printed %q", run, out)
		}
		gpu, said, pinned := f[1], f[2], f[3]
		if !slices.Contains([]string{"0", "1", "2", "3"}, gpu) {
			t.Errorf("run %s: CUDA_VISIBLE_DEVICES=%q, want exactly one of the job's GPUs", run, gpu)
		}
		if said != pinned {
			t.Errorf("run %s: NODEPACK_CPUS=%s but pinned to %s", run, said, pinned)
		}
		runsPerGPU[gpu]++
		runsPerCPU[pinned]++
	}
	for gpu, n := range runsPerGPU {
		if n != 2 {
			t.Errorf("GPU %s ran %d runs, want 2 (--runs-per-gpu 2)", gpu, n)
		}
	}
	// 8 runs at once on this 2-CPU node must share CPUs: evenly, one CPU each.
	for cpu, n := range runsPerCPU {
		if strings.ContainsAny(cpu, ",-") || n != 4 {
			t.Errorf("CPU %q had %d runs; want single CPUs with 4 runs each: %v", cpu, n, runsPerCPU)
		}
	}
}

// TestTorchThreads is scenario 5: the PyTorch example under 2 concurrent
// runs on the 2-CPU node: each sees OMP_NUM_THREADS=1,
// torch.get_num_threads() == 1 and its own CPU.
func TestTorchThreads(t *testing.T) {
	needSlurm(t)
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import torch").Run() != nil {
		t.Skip("Debian's python3-torch is not installed")
	}
	dir := t.TempDir()
	train := filepath.Join(repoRoot, "examples/train/train.py")
	tasks := writeTasks(t, dir,
		python+" "+train+" --epochs 2 --seed 1 --epoch-seconds 1",
		python+" "+train+" --epochs 2 --seed 2 --epoch-seconds 1")
	id := submit(t, dir, "--exclusive", "--output", filepath.Join(dir, "job.log"),
		"--wrap", "exec $NODEPACK run --parallel 2 --gpus none --output out "+tasks)
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "job.log")))
	}
	outputs := runOutputs(t, filepath.Join(dir, "out"))
	if len(outputs) != 2 {
		t.Fatalf("%d runs, want 2:\n%s", len(outputs), jobLog(t, filepath.Join(dir, "job.log")))
	}
	var cpus []int
	for run, out := range outputs {
		var start struct {
			Backend      string `json:"backend"`
			Affinity     []int  `json:"affinity"`
			TorchThreads int    `json:"torch_threads"`
			OMP          string `json:"omp_num_threads"`
		}
		first, _, _ := strings.Cut(out, "\n")
		if err := json.Unmarshal([]byte(first), &start); err != nil {
			t.Fatalf("run %s: %v: %q", run, err, out)
		}
		if !strings.HasPrefix(start.Backend, "torch") || start.TorchThreads != 1 || start.OMP != "1" || len(start.Affinity) != 1 {
			t.Errorf("run %s: %+v; want torch with 1 thread, OMP_NUM_THREADS=1, one CPU", run, start)
		}
		cpus = append(cpus, start.Affinity...)
		if !strings.Contains(out, `"event": "done"`) {
			t.Errorf("run %s did not finish training:\n%s", run, out)
		}
	}
	slices.Sort(cpus)
	if !slices.Equal(cpus, []int{0, 1}) {
		t.Errorf("runs on CPUs %v, want one each on 0 and 1", cpus)
	}
}

// statusOf returns nodepack status DIR --json.
func statusOf(t *testing.T, dir string) (doc struct {
	Counts map[string]int `json:"counts"`
	Shards []any          `json:"shards"`
}) {
	t.Helper()
	out, err := exec.Command(nodepack, "status", "--json", dir).Output()
	if err != nil {
		t.Fatalf("nodepack status %s: %v", dir, err)
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	return doc
}

// record is the part of a ledger record these tests read.
type record struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
	// Steps is a finished record's: how far its attempt got, where its
	// last checkpoint was, what a stop lost.
	Steps *struct {
		First, Last, Checkpoint, Lost float64
	} `json:"steps"`
}

// ledgerRecords reads every record of every ledger file in dir, in order
// within each file.
func ledgerRecords(t *testing.T, dir string) []record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "ledger*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no ledger in %s", dir)
	}
	var recs []record
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var r record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			recs = append(recs, r)
		}
		fh.Close()
	}
	return recs
}

// doneLines returns the lines of the file runs append their id to when
// they complete, and fails the test if any id is there twice.
func doneLines(t *testing.T, path string) []string {
	t.Helper()
	b, _ := os.ReadFile(path)
	lines := strings.Fields(string(b))
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("run %s completed twice", l)
		}
		seen[l] = true
	}
	return lines
}

// TestArrayShards is scenario 2: one sweep over an array of 3; every run
// ran exactly once across the shards, and status sees all three.
func TestArrayShards(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	done := filepath.Join(dir, "done.txt")
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf("echo $NODEPACK_RUN_ID >> %s; : run %d", done, i))
	}
	tasks := writeTasks(t, dir, lines...)
	id := submit(t, dir, "--export=ALL,NODEPACK="+nodepack+",TASKS="+tasks, filepath.Join(repoRoot, "examples/slurm/array.sbatch"))
	if err := wait(t, id, 180); err != nil {
		t.Fatalf("array %s: %v", id, err)
	}
	if got := doneLines(t, done); len(got) != 10 {
		t.Errorf("%d runs completed, want 10 (each once)", len(got))
	}
	out := outputOf(t, dir, id)
	st := statusOf(t, out)
	if st.Counts["succeeded"] != 10 || len(st.Shards) != 3 {
		t.Errorf("status: counts %v, %d shards; want 10 succeeded in 3 shards", st.Counts, len(st.Shards))
	}
	// As the README and the script say: nodepack status nodepack-ARRAYID,
	// in the directory the array was submitted from.
	cmd := exec.Command(nodepack, "status", "nodepack-"+id)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil || strings.Count(string(b), "(shard ") != 3 || !strings.Contains(string(b), "10 succeeded") {
		t.Errorf("nodepack status nodepack-%s: %v\n%s\nwant the 3 shards, 10 succeeded", id, err, b)
	}
	// The report and the results table take the shards together.
	if b, err := exec.Command(nodepack, "report", out).CombinedOutput(); err != nil || !strings.Contains(string(b), "10 runs, 10 attempts") {
		t.Errorf("nodepack report: %v\n%s", err, b)
	}
	if b, err := exec.Command(nodepack, "status", "--runs", out).Output(); err != nil || strings.Count(string(b), "\n") != 11 {
		t.Errorf("results table: %v\n%s\nwant a header and 10 rows", err, b)
	}
}

// trainTasks returns task lines that run the training example, each
// appending its run id to done when it completes.
func trainTasks(dir, done string, epochs []int, epochSeconds int) []string {
	python := "/usr/bin/python3"
	train := filepath.Join(repoRoot, "examples/train/train.py")
	var lines []string
	for i, n := range epochs {
		lines = append(lines, fmt.Sprintf("%s %s --epochs %d --epoch-seconds %d --seed %d && echo $NODEPACK_RUN_ID >> %s",
			python, train, n, epochSeconds, i, done))
	}
	return lines
}

// TestScancelThenRequeue is scenario 3: scancel mid-sweep (Slurm itself
// sends SIGCONT and SIGTERM to every process of the job, not only to
// nodepack): the running runs end as interrupted, not failed, each having
// lost at most the epoch under way (the ledger's steps); scontrol requeue
// runs the same job id again, which finishes only the unfinished runs,
// and the training runs resume from their checkpoints, in the folder
// every attempt of a run gets.
func TestScancelThenRequeue(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	done := filepath.Join(dir, "done.txt")
	tasks := writeTasks(t, dir, trainTasks(dir, done, []int{6, 6, 6, 6}, 1)...)
	id := submit(t, dir, "--export=ALL,NODEPACK="+nodepack+",TASKS="+tasks, filepath.Join(repoRoot, "examples/slurm/sweep.sbatch"))
	var out string
	waitFor(t, 60, "every run to checkpoint", func() bool {
		if out == "" {
			out = outputOf(t, dir, id)
		}
		c, _ := filepath.Glob(filepath.Join(out, "runs", "*", "checkpoints", "checkpoint"))
		return len(c) == 4
	})
	if err := exec.Command("scancel", id).Run(); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, id, 120); err == nil {
		t.Fatalf("job %s completed although cancelled", id)
	}
	reasons := map[string]int{}
	for _, r := range ledgerRecords(t, out) {
		if r.Type == "finished" {
			reasons[r.Reason]++
			// The checkpoint contract: each run's checkpoint folder kept its
			// epochs; a stop loses at most the one under way.
			if r.Steps == nil || r.Steps.Checkpoint < 1 || r.Steps.Lost > 1 {
				t.Errorf("run %s: steps %+v: want a checkpoint, and at most one epoch lost", r.ID, r.Steps)
			}
		}
	}
	if reasons["interrupted"] != 4 || len(reasons) != 1 {
		t.Fatalf("finished records by reason %v, want 4 interrupted and nothing else:\n%s", reasons, jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	if st := statusOf(t, out); st.Counts["interrupted"] != 4 || st.Counts["failed"] != 0 {
		t.Errorf("status after scancel: %v", st.Counts)
	}

	if out, err := exec.Command("scontrol", "requeue", id).CombinedOutput(); err != nil {
		t.Fatalf("scontrol requeue %s: %v: %s", id, err, out)
	}
	if err := wait(t, id, 180); err != nil {
		t.Fatalf("requeued job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	if got := doneLines(t, done); len(got) != 4 {
		t.Errorf("%d runs completed, want 4, each once", len(got))
	}
	for run, log := range runOutputs(t, out) {
		if !strings.Contains(log, `"event": "resume"`) || strings.Contains(log, `"from_epoch": 0`) {
			t.Errorf("run %s did not resume from its checkpoint:\n%s", run, log)
		}
	}
	if st := statusOf(t, out); st.Counts["succeeded"] != 4 || st.Counts["failed"] != 0 {
		t.Errorf("status after the requeue: %v", st.Counts)
	}
}

// TestTimeLimitWarning is scenario 4: a time limit with
// --signal=B:USR1@30: on the warning nodepack starts no more runs, asks the
// running ones for a checkpoint (--checkpoint-signal USR1), stops them, and
// requeues the job;
// the requeued job completes the sweep. Slurm checks limits on a 30 s tick,
// so this takes two to three minutes.
func TestTimeLimitWarning(t *testing.T) {
	needSlurm(t)
	if testing.Short() {
		t.Skip("takes minutes")
	}
	dir := t.TempDir()
	done := filepath.Join(dir, "done.txt")
	// Two long runs outlast the warning; the third, short, would start only
	// after one of them ended, so the first job never starts it.
	tasks := writeTasks(t, dir, trainTasks(dir, done, []int{14, 14, 1}, 7)...)
	id := submit(t, dir, "--time=2", "--signal=B:USR1@30",
		"--export=ALL,NODEPACK="+nodepack+",TASKS="+tasks+",NODEPACK_FLAGS=--parallel 2 --checkpoint-signal USR1",
		filepath.Join(repoRoot, "examples/slurm/sweep.sbatch"))
	if err := wait(t, id, 420); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	log := jobLog(t, filepath.Join(dir, "nodepack-"+id+".log"))
	if !strings.Contains(log, "stopped by SIGUSR1") || !strings.Contains(log, "requeued job "+id) {
		t.Errorf("the job log does not show the warning and the requeue:\n%s", log)
	}
	if got := doneLines(t, done); len(got) != 3 {
		t.Errorf("%d runs completed, want 3, each once:\n%s", len(got), log)
	}
	recs := ledgerRecords(t, outputOf(t, dir, id))
	var interrupted, startedFirst int
	firstSession := true
	for _, r := range recs {
		switch {
		case r.Type == "end":
			firstSession = false
		case r.Type == "finished" && r.Reason == "interrupted":
			interrupted++
			// Asked for a checkpoint first (--checkpoint-signal): at most
			// the epoch under way is lost.
			if r.Steps == nil || r.Steps.Checkpoint < 1 || r.Steps.Lost > 1 {
				t.Errorf("run %s: steps %+v: want a checkpoint, and at most one epoch lost", r.ID, r.Steps)
			}
		case r.Type == "started" && firstSession:
			startedFirst++
		}
	}
	if interrupted != 2 || startedFirst != 2 {
		t.Errorf("%d interrupted runs, %d started by the first job; want the 2 long ones both times", interrupted, startedFirst)
	}
}

// TestStopBeforeOnSlurm22: Slurm 22.05 sets no SLURM_JOB_END_TIME, so
// --stop-before asks squeue for the job's end: with the end 5 minutes away
// and --stop-before 4m45s, nodepack stops starting runs after about 15 s
// and exits 3 with the rest deferred. In a second job, the time limit is
// raised (scontrol update TimeLimit) while it runs: nodepack follows the
// new end and runs every run.
func TestStopBeforeOnSlurm22(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	done := filepath.Join(dir, "done.txt")
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("sleep 1; echo $NODEPACK_RUN_ID >> %s # %d", done, i))
	}
	tasks := writeTasks(t, dir, lines...)
	script := "env | grep -q SLURM_JOB_END_TIME && echo HAS_END_TIME; exec $NODEPACK run --gpus none --parallel 1 --grace 2s --stop-before 4m45s -o out " + tasks
	id := submit(t, dir, "--time=5", "--output", filepath.Join(dir, "job1.log"), "--wrap", script)
	if err := wait(t, id, 120); err == nil {
		t.Errorf("job %s exited 0; want 3 (runs deferred)", id)
	}
	log := jobLog(t, filepath.Join(dir, "job1.log"))
	if strings.Contains(log, "HAS_END_TIME") {
		t.Log("this Slurm sets SLURM_JOB_END_TIME: the squeue fallback is not what ran")
	}
	got := doneLines(t, done)
	if !strings.Contains(log, "stopped starting runs 4m45s before the job's end") || len(got) == 0 || len(got) >= 30 {
		t.Fatalf("%d runs done; want some, not all, and the stop in the log:\n%s", len(got), log)
	}
	recs := ledgerRecords(t, filepath.Join(dir, "out"))
	if last := recs[len(recs)-1]; last.Type != "end" {
		t.Errorf("the ledger does not end with an end record: %+v", last)
	}

	// The same sweep, resumed in a job whose limit is raised while it runs.
	id = submit(t, dir, "--time=5", "--output", filepath.Join(dir, "job2.log"), "--wrap", script)
	waitFor(t, 60, "the second job to start a run", func() bool { return len(doneLines(t, done)) > len(got) })
	if out, err := exec.Command("scontrol", "update", "jobid="+id, "TimeLimit=15").CombinedOutput(); err != nil {
		t.Fatalf("scontrol update: %v: %s", err, out)
	}
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "job2.log")))
	}
	log = jobLog(t, filepath.Join(dir, "job2.log"))
	if !strings.Contains(log, "the job's end moved") || len(doneLines(t, done)) != 30 {
		t.Errorf("%d runs done, want 30 after the limit moved:\n%s", len(doneLines(t, done)), log)
	}
}

// waitFor polls cond every 100 ms for up to seconds.
func waitFor(t *testing.T, seconds int, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < seconds*10; i++ {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
