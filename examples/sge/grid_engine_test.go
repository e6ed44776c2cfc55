package sge_test

// These tests run nodepack under a real Grid Engine: the example job
// scripts, submitted with qsub to the single-node cell that
// scripts/sge-local.sh starts. They are skipped unless
// NODEPACK_SGE_TESTS=1 (set by .ci/run after starting the cell), so
// go test ./... needs no Grid Engine.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/examples/internal/journey"
)

var (
	repoRoot string // the repository, from this package's directory
	nodepack string // nodepack built for these tests
	sgeLocal string // scripts/sge-local.sh, whose wait is the test oracle
	sgeEnv   []string
)

func TestMain(m *testing.M) {
	if os.Getenv("NODEPACK_SGE_TESTS") != "1" {
		fmt.Println("skipping the Grid Engine tests: set NODEPACK_SGE_TESTS=1 after scripts/sge-local.sh start")
		os.Exit(m.Run()) // the real ones skip themselves
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		panic(err)
	}
	sgeLocal = filepath.Join(repoRoot, "scripts", "sge-local.sh")
	// sge-local.sh env prints "export SGE_ROOT=… PATH=…:$PATH".
	out, err := exec.Command("bash", "-c", `eval "$("$1" env)" && env`, "env", sgeLocal).Output()
	if err != nil {
		fmt.Println("sge-local.sh env:", err)
		os.Exit(1)
	}
	for line := range strings.Lines(string(out)) {
		kv := strings.TrimSpace(line)
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SGE_") || k == "PATH" {
			sgeEnv = append(sgeEnv, kv)
		}
	}
	if nodepack, err = journey.Build(repoRoot); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(filepath.Dir(nodepack))
	os.Exit(code)
}

func needSGE(t *testing.T) {
	t.Helper()
	if nodepack == "" {
		t.Skip("NODEPACK_SGE_TESTS is not 1")
	}
}

// qsub submits a job script from dir, with env added to the submitter's
// environment (the example scripts export it with -V: -v would split a
// value at its commas), and returns the job id.
func qsub(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("qsub", append([]string{"-terse"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(cleanEnv(), sgeEnv...), append([]string{"NODEPACK=" + nodepack}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("qsub %q: %v\n%s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ".") // 12.1-7:3 for an array
	t.Cleanup(func() { sge(t, "qdel", id).Run() })
	return id
}

// sge is a Grid Engine client command with the cell's environment.
func sge(t *testing.T, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(cleanEnv(), sgeEnv...)
	return cmd
}

// wait waits for the job (every array task) to leave the queue; nil only
// if the last run of every task ended with exit 0. sge-local.sh's wait,
// which reads the accounting records, is the oracle.
func wait(t *testing.T, id string, timeoutSeconds int) error {
	t.Helper()
	cmd := exec.Command(sgeLocal, "wait", id, strconv.Itoa(timeoutSeconds))
	cmd.Env = append(cleanEnv(), sgeEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func writeTasks(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func read(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// logs returns the job's .o files in dir, joined: what nodepack printed.
func logs(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(f), read(f))
	}
	return b.String()
}

// succeeded counts the runs of nodepack status DIR --json that succeeded.
func succeeded(t *testing.T, dir string) int {
	t.Helper()
	out, err := exec.Command(nodepack, "status", "--json", dir).Output()
	if err != nil {
		t.Fatalf("nodepack status %s: %v", dir, err)
	}
	var doc struct {
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	return doc.Counts["succeeded"]
}

// span is when a run ran, as it printed it: the array task that ran it,
// then its start and end.
type span struct {
	task       string
	start, end float64
}

// timed is a run that prints its span.
const timed = `echo $SGE_TASK_ID $(date +%s.%N); sleep 0.3; date +%s.%N`

// overlap reports whether two runs of one task ran at the same time.
func overlap(t *testing.T, out string) bool {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
	byTask := map[string][]span{}
	for _, l := range logs {
		var sp span
		if _, err := fmt.Sscan(read(l), &sp.task, &sp.start, &sp.end); err != nil {
			t.Fatalf("%s: %q: %v", l, read(l), err)
		}
		byTask[sp.task] = append(byTask[sp.task], sp)
	}
	for _, s := range byTask {
		slices.SortFunc(s, func(a, b span) int { return cmp.Compare(a.start, b.start) })
		for i := 1; i < len(s); i++ {
			if s[i].start < s[i-1].end {
				return true
			}
		}
	}
	return false
}

// TestGridEngineArray: examples/sge/array.qsub as qsub -t 1-3 and as
// -t 1-7:3, each task with one slot (-pe smp 1 over the script's 16): the
// tasks share the sweep out, every run runs exactly once, one at a time
// within a task (NSLOTS=1 on this node of more CPUs, with a warning
// naming -binding), and each task's .o file holds nodepack's own lines
// while the runs' output is in the output directory.
func TestGridEngineArray(t *testing.T) {
	needSGE(t)
	if out, err := exec.Command(sgeLocal, "status").CombinedOutput(); err != nil {
		t.Fatalf("sge-local.sh status: %v\n%s", err, out) // exit 0 only with both daemons up
	}
	var lines []string
	for i := range 9 {
		lines = append(lines, "echo run "+strconv.Itoa(i)+" >&2; "+timed)
	}
	for _, array := range []string{"1-3", "1-7:3"} {
		t.Run(array, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tasks := writeTasks(t, dir, lines...)
			id := qsub(t, dir, []string{"TASKS=" + tasks}, "-t", array, "-pe", "smp", "1", filepath.Join(repoRoot, "examples/sge/array.qsub"))
			if err := wait(t, id, 180); err != nil {
				t.Fatalf("job %s: %v\n%s", id, err, logs(dir))
			}
			out := filepath.Join(dir, "nodepack-"+id)
			if n := succeeded(t, out); n != 9 {
				t.Errorf("%d runs succeeded, want 9\n%s", n, logs(dir))
			}
			errs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stderr.log"))
			var seen []string
			for _, e := range errs {
				seen = append(seen, strings.TrimSpace(read(e)))
			}
			slices.Sort(seen)
			if want := []string{"run 0", "run 1", "run 2", "run 3", "run 4", "run 5", "run 6", "run 7", "run 8"}; !slices.Equal(seen, want) {
				t.Errorf("runs that ran: %q, want each once", seen)
			}
			taskLogs, _ := filepath.Glob(filepath.Join(dir, "nodepack-"+id+".*.log"))
			if len(taskLogs) != 3 {
				t.Errorf("task logs %v, want one per task", taskLogs)
			}
			for _, l := range taskLogs {
				text := read(l)
				if !strings.Contains(text, "nodepack: output nodepack-"+id) || strings.Contains(text, "run 0") {
					t.Errorf("%s holds %q: want nodepack's lines, not the runs' output", l, text)
				}
				if nproc, _ := strconv.Atoi(strings.TrimSpace(must(exec.Command("nproc").Output()))); nproc > 1 && !strings.Contains(text, "-binding linear:1") {
					t.Errorf("%s: no word on NSLOTS=1 and -binding:\n%s", l, text)
				}
			}
			// The report and the table take the three shards' ledgers
			// together, each shard with lanes of its own.
			if b, err := exec.Command(nodepack, "report", out).CombinedOutput(); err != nil || !strings.Contains(string(b), "9 runs, 9 attempts") {
				t.Errorf("nodepack report: %v\n%s", err, b)
			}
			page := read(filepath.Join(out, "report.html"))
			for i := range 3 {
				if !strings.Contains(page, fmt.Sprintf("shard %d/3 CPU lane 0", i)) {
					t.Errorf("the report has no lane of shard %d", i)
				}
			}
			if table := must(exec.Command(nodepack, "status", "--runs", out).Output()); strings.Count(table, "\n") != 10 {
				t.Errorf("results table:\n%s\nwant a header and 9 rows", table)
			}
			if overlap(t, out) {
				t.Errorf("runs of one task overlapped: NSLOTS=1 should have run them one at a time")
			}
		})
	}
}

func must(b []byte, _ error) string { return string(b) }

// TestGridEngineSuspendRequeue: examples/sge/sweep.qsub (-notify) with
// --requeue, and fake GPUs as a site's prolog would set them: qmod -sj
// while the runs run sends SIGUSR1, the queue's notify time before the
// suspend; nodepack stops the runs within --grace and exits 99, Grid
// Engine runs the job again (same JOB_ID, RESTARTED=1), and the rerun
// resumes the same output directory and finishes every run exactly once.
func TestGridEngineSuspendRequeue(t *testing.T) {
	needSGE(t)
	dir := t.TempDir()
	var lines []string
	for i := range 4 {
		// The first attempt marks itself and runs until stopped; a later
		// one ends at once.
		lines = append(lines, fmt.Sprintf(`test -e ran-%d && echo again && exit 0; touch ran-%d; sleep 300`, i, i))
	}
	tasks := writeTasks(t, dir, lines...)
	id := qsub(t, dir, []string{"TASKS=" + tasks, "CUDA_VISIBLE_DEVICES=0,1", "NODEPACK_FLAGS=--requeue --grace 2s"},
		"-pe", "smp", "2", filepath.Join(repoRoot, "examples/sge/sweep.qsub"))
	waitForFiles(t, dir, "ran-0", "ran-1", "ran-2", "ran-3")
	if out, err := sge(t, "qmod", "-sj", id).CombinedOutput(); err != nil {
		t.Fatalf("qmod -sj: %v\n%s", err, out)
	}
	if err := wait(t, id, 180); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, logs(dir))
	}
	out := filepath.Join(dir, "nodepack-"+id)
	log := logs(dir)
	if n := succeeded(t, out); n != 4 {
		t.Errorf("%d runs succeeded, want 4\n%s", n, log)
	}
	for _, want := range []string{"SIGUSR1", "exiting 99 so that Grid Engine reschedules job " + id, "nodepack: output nodepack-" + id} {
		if !strings.Contains(log, want) {
			t.Errorf("the job's log does not say %q:\n%s", want, log)
		}
	}
	if strings.Count(log, "nodepack: output nodepack-"+id) != 2 {
		t.Errorf("want two runs of the job on one output directory:\n%s", log)
	}
	outputs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
	for _, o := range outputs {
		if !strings.Contains(read(o), "again") {
			t.Errorf("%s: %q; want the rerun's line", o, read(o))
		}
	}
}

// waitForFiles waits until the runs have made the files in dir.
func waitForFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, n := range names {
		for {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared:\n%s", n, logs(dir))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// gone waits for the processes to end; it reports those still alive
// after 15 s.
func gone(pids []int) []int {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var alive []int
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pidsIn reads the pid files the runs wrote in dir.
func pidsIn(t *testing.T, dir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "pid-*"))
	var pids []int
	for _, f := range files {
		for _, w := range strings.Fields(read(f)) {
			if p, err := strconv.Atoi(w); err == nil {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// TestGridEngineDelete: qdel, with and without -notify. A -notify job
// (examples/sge/sweep.qsub) gets SIGUSR2 and nodepack stops its runs
// itself; a job without (a script of the user's own) gets SIGKILL, and
// the supervisor stops the runs. Either way no run process is left (not
// even one that left the run's process group with setsid), Grid
// Engine does not run a deleted job again, and a new submission with the
// same output directory resumes and finishes every run once.
func TestGridEngineDelete(t *testing.T) {
	needSGE(t)
	// A run writes its own pid, its child's and that of a child that left
	// its process group and session (setsid), then waits; a later attempt
	// ends at once.
	var lines []string
	for i := range 2 {
		lines = append(lines, fmt.Sprintf(`test -e ran-%d && echo again && exit 0; touch ran-%d; setsid sleep 300 & e=$!; sleep 300 & echo $$ $! $e > pid-%d; wait`, i, i, i))
	}
	plain := "#!/bin/bash\n#$ -cwd\n#$ -V\n#$ -j y\n#$ -o plain.log\nexec \"$NODEPACK\" run --output out --grace 2s \"$TASKS\"\n"
	for _, tc := range []struct {
		name, script string
		env          []string
		again        func(id string) []string // a resubmission's environment
		output       func(dir, id string) string
	}{
		{"notify", filepath.Join(repoRoot, "examples/sge/sweep.qsub"), []string{"CUDA_VISIBLE_DEVICES=0", "NODEPACK_FLAGS=--grace 2s"},
			func(id string) []string { return []string{"NODEPACK_FLAGS=--grace 2s --output nodepack-" + id} },
			func(dir, id string) string { return filepath.Join(dir, "nodepack-"+id) }},
		{"kill", "plain.qsub", nil, func(string) []string { return nil }, func(dir, _ string) string { return filepath.Join(dir, "out") }},
	} {
		// One after the other: each takes both slots of a 2-CPU cell.
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tasks := writeTasks(t, dir, lines...)
			os.WriteFile(filepath.Join(dir, "plain.qsub"), []byte(plain), 0o755)
			env := append([]string{"TASKS=" + tasks}, tc.env...)
			id := qsub(t, dir, env, "-pe", "smp", "2", tc.script)
			waitForFiles(t, dir, "pid-0", "pid-1")
			pids := pidsIn(t, dir)
			if out, err := sge(t, "qdel", id).CombinedOutput(); err != nil {
				t.Fatalf("qdel: %v\n%s", err, out)
			}
			if alive := gone(pids); len(alive) > 0 {
				t.Errorf("processes of runs alive after qdel: %v\n%s", alive, logs(dir))
			}
			wait(t, id, 120) // it failed: it was deleted
			if log := logs(dir); strings.Count(log, "nodepack: output") != 1 {
				t.Errorf("a deleted job ran again:\n%s", log)
			}
			id2 := qsub(t, dir, append(env, tc.again(id)...), "-pe", "smp", "2", tc.script)
			if err := wait(t, id2, 120); err != nil {
				t.Fatalf("resubmitted job %s: %v\n%s", id2, err, logs(dir))
			}
			out := tc.output(dir, id)
			if n := succeeded(t, out); n != 2 {
				t.Errorf("%d runs succeeded in %s, want 2\n%s", n, out, logs(dir))
			}
			if log := logs(dir); !strings.Contains(log, "resum") {
				t.Errorf("the second job does not say it resumed:\n%s", log)
			}
		})
	}
}

// TestGridEngineStopBefore: a job with -l h_rt=0:0:30 and --stop-before
// 24s starts runs for its first 6 s only: nodepack takes the end from
// qstat -j, says so, runs 4 s runs one after the other (-pe smp 1), starts
// none after the job's first 6 s, and leaves the rest for a rerun before
// Grid Engine's SIGKILL. How many start in those 6 s (one or two) depends
// on how soon nodepack starts in the job, which a loaded node delays: the
// test holds what is promised, the times of the starts, not a count.
func TestGridEngineStopBefore(t *testing.T) {
	needSGE(t)
	dir := t.TempDir()
	var lines []string
	for i := range 5 {
		lines = append(lines, fmt.Sprintf("echo %d; sleep 4", i))
	}
	tasks := writeTasks(t, dir, lines...)
	// The script notes when it starts: the job started no later, so its
	// drain deadline (its start + 6 s) is no later than this + 6 s.
	script := "#!/bin/bash\n#$ -cwd\n#$ -V\n#$ -j y\n#$ -o job.log\n#$ -l h_rt=0:0:30\ndate +%s.%N > job-start\nexec \"$NODEPACK\" run --output out --stop-before 24s --grace 1s \"$TASKS\"\n"
	os.WriteFile(filepath.Join(dir, "job.qsub"), []byte(script), 0o755)
	id := qsub(t, dir, []string{"TASKS=" + tasks}, "-pe", "smp", "1", "job.qsub")
	wait(t, id, 120) // nodepack's exit says runs are left
	log := read(filepath.Join(dir, "job.log"))
	jobStart, err := strconv.ParseFloat(strings.TrimSpace(read(filepath.Join(dir, "job-start"))), 64)
	if err != nil {
		t.Fatalf("the job's start: %v\n%s", err, log)
	}
	var starts []float64
	ended := 0
	for _, line := range strings.Split(read(filepath.Join(dir, "out", "ledger.jsonl")), "\n") {
		var rec struct {
			Type   string
			Time   time.Time
			Reason string
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec.Type == "started":
			starts = append(starts, float64(rec.Time.UnixNano())/1e9)
		case rec.Type == "finished" && rec.Reason == "ok":
			ended++
		}
	}
	if len(starts) < 1 || len(starts) > 2 || ended != len(starts) {
		t.Errorf("%d runs started, %d succeeded: want one or two (4 s each, in the first 6 s), each run to its end\n%s", len(starts), ended, log)
	}
	for _, at := range starts {
		if at > jobStart+6 {
			t.Errorf("a run started %.1f s into the job, past its drain deadline (6 s)\n%s", at-jobStart, log)
		}
	}
	if n := succeeded(t, filepath.Join(dir, "out")); n != ended {
		t.Errorf("status says %d runs succeeded, the ledger %d", n, ended)
	}
	if !strings.Contains(log, "qstat -j "+id+": h_rt") {
		t.Errorf("the log does not say where the end came from:\n%s", log)
	}
	acct := must(sge(t, "qacct", "-j", id).Output())
	if strings.Contains(acct, "h_rt") && strings.Contains(acct, "failed       37") {
		t.Errorf("Grid Engine killed the job at h_rt:\n%s", acct)
	}
}

// TestGridEngineBinding: with -binding linear:1 Grid Engine binds the job
// to one core; nodepack uses exactly that CPU, with no warning about
// slots, and pins its run there.
func TestGridEngineBinding(t *testing.T) {
	needSGE(t)
	dir := t.TempDir()
	tasks := writeTasks(t, dir, `grep Cpus_allowed_list /proc/self/status | cut -f2`)
	script := "#!/bin/bash\n#$ -cwd\n#$ -V\n#$ -j y\n#$ -o job.log\ngrep Cpus_allowed_list /proc/self/status | cut -f2 > job-cpus\nexec \"$NODEPACK\" run --output out \"$TASKS\"\n"
	os.WriteFile(filepath.Join(dir, "job.qsub"), []byte(script), 0o755)
	id := qsub(t, dir, []string{"TASKS=" + tasks}, "-pe", "smp", "1", "-binding", "linear:1", "job.qsub")
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, read(filepath.Join(dir, "job.log")))
	}
	job := strings.TrimSpace(read(filepath.Join(dir, "job-cpus")))
	outs, _ := filepath.Glob(filepath.Join(dir, "out", "runs", "*", "stdout.log"))
	if len(outs) != 1 || strings.ContainsAny(job, ",-") || strings.TrimSpace(read(outs[0])) != job {
		t.Errorf("job bound to CPUs %q, run pinned to %v; want one CPU, the same", job, outs)
	}
	if log := read(filepath.Join(dir, "job.log")); strings.Contains(log, "-binding") {
		t.Errorf("a warning about slots in a bound job:\n%s", log)
	}
}
