package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/run"
)

// gatedSweep is a task file of n runs: the first two finish at once, the
// others, until the file GATE exists, block in a process tree with a
// setsid grandchild and a subshell. Every run appends its id to DONE when
// it completes, so counting lines counts completions.
type gatedSweep struct {
	dir, file, out, token string
	n                     int
}

func newGatedSweep(t *testing.T, n int) *gatedSweep {
	t.Helper()
	dir := t.TempDir()
	s := &gatedSweep{dir: dir, out: filepath.Join(dir, "out"), token: tokenFor("np-resume-", dir), n: n}
	var tasks strings.Builder
	for i := range n {
		block := ""
		if i >= 2 {
			block = fmt.Sprintf("if [ ! -e %[1]s/GATE ]; then touch %[1]s/BLOCK.$NODEPACK_RUN_ID; setsid bash -c 'exec -a %[2]s sleep 60' & (exec -a %[2]s sleep 61); fi; ", dir, s.token)
		}
		fmt.Fprintf(&tasks, "%secho $NODEPACK_RUN_ID >> %s/DONE # %d\n", block, dir, i)
	}
	s.file = writeFile(t, dir, "tasks.txt", tasks.String())
	return s
}

func (s *gatedSweep) args(extra ...string) []string {
	return append(append([]string{"run", "-q", "--parallel", "2", "--gpus", "none", "--grace", "1s", "-o", s.out}, extra...), s.file)
}

// start runs nodepack as a separate process and waits until two runs are
// blocked and the ledger has recorded their start and the end of the two
// others (records go with the ledger's next group commit, a few
// milliseconds later; a run whose end is not recorded runs again).
func (s *gatedSweep) start(t *testing.T) (*syncProcess, func() string) {
	t.Helper()
	cmd, stderr := startNodepack(t, s.token, s.args()...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if blocked, _ := filepath.Glob(filepath.Join(s.dir, "BLOCK.*")); len(blocked) == 2 {
			if log, err := ledger.ReadFile(filepath.Join(s.out, "ledger.jsonl"), ledger.ReadOptions{}); err == nil && log.Count()[ledger.StateRunning] == 2 && log.Count()[ledger.StateSucceeded] == 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs did not block:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &syncProcess{cmd.Process, cmd.Wait}, stderr.String
}

type syncProcess struct {
	*os.Process
	wait func() error
}

// open lets the blocked runs through on the next run, and forgets which
// ones blocked.
func (s *gatedSweep) open(t *testing.T) {
	t.Helper()
	writeFile(t, s.dir, "GATE", "")
	blocked, _ := filepath.Glob(filepath.Join(s.dir, "BLOCK.*"))
	for _, b := range blocked {
		os.Remove(b)
	}
}

// completions counts the lines of DONE by run id.
func (s *gatedSweep) completions(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "DONE"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, id := range strings.Fields(string(b)) {
		counts[id]++
	}
	return counts
}

func (s *gatedSweep) ledger(t *testing.T) *ledger.Log {
	t.Helper()
	log, err := ledger.ReadFile(filepath.Join(s.out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// waitGone waits up to limit for every process of the sweep to be gone.
func waitGone(t *testing.T, token string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		left := processesWith(token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var cmdlines []string
			for _, pid := range left {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				cmdlines = append(cmdlines, fmt.Sprintf("%d %q", pid, b))
			}
			t.Fatalf("%d processes left %v after nodepack died: %s", len(left), limit, strings.Join(cmdlines, "; "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkStatusMatchesLedger compares status --json with the ledger's own
// fold.
func checkStatusMatchesLedger(t *testing.T, s *gatedSweep, want results.Counts) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "status", "--json", s.out)
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var doc results.Status
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if doc.Counts != want {
		t.Errorf("status counts %+v, want %+v", doc.Counts, want)
	}
	log := s.ledger(t)
	c := log.Count()
	fold := results.Counts{Pending: s.n - log.Len(), Running: c[ledger.StateRunning], Succeeded: c[ledger.StateSucceeded],
		Failed: c[ledger.StateFailed], Interrupted: c[ledger.StateInterrupted]}
	if log.Live() && syscall.Kill(log.Header().PID, 0) != nil {
		fold.Interrupted += fold.Running
		fold.Running = 0
	}
	if doc.Counts != fold {
		t.Errorf("status counts %+v, ledger says %+v", doc.Counts, fold)
	}
	if doc.Total == nil || *doc.Total != s.n || len(doc.Running) != doc.Counts.Running {
		t.Errorf("status total %v, %d running listed; want %d, %d", doc.Total, len(doc.Running), s.n, doc.Counts.Running)
	}
}

// TestKill9ThenRerun is the cycle, 20 times: kill -9 of nodepack
// mid-sweep leaves no process of any run's tree (the setsid grandchild and
// the supervisor finds them) after 2 s, and a rerun completes every run exactly
// once. The status of the live sweep and of the finished one agrees with
// the ledger.
func TestKill9ThenRerun(t *testing.T) {
	cycles := 20
	if testing.Short() {
		cycles = 3
	}
	for cycle := range cycles {
		s := newGatedSweep(t, 5)
		p, stderr := s.start(t)
		if cycle == 0 {
			checkStatusMatchesLedger(t, s, results.Counts{Pending: 1, Running: 2, Succeeded: 2})
		}
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait()
		waitGone(t, s.token, 2*time.Second)
		if cycle == 0 {
			// The ledger shows 2 started, never finished: status sees that
			// their nodepack is gone.
			checkStatusMatchesLedger(t, s, results.Counts{Pending: 1, Interrupted: 2, Succeeded: 2})
		}

		s.open(t)
		code, _, errOut := runCLI(t, s.args()...)
		if code != exitOK {
			t.Fatalf("cycle %d: rerun exit %d:\n%s\nfirst run:\n%s", cycle, code, errOut, stderr())
		}
		done := s.completions(t)
		if len(done) != s.n {
			t.Errorf("cycle %d: %d runs completed, want %d: %v", cycle, len(done), s.n, done)
		}
		for id, n := range done {
			if n != 1 {
				t.Errorf("cycle %d: run %s completed %d times", cycle, id, n)
			}
		}
		if !strings.Contains(errOut, "skipped 2 runs done before: 2 succeeded") {
			t.Errorf("cycle %d: rerun summary:\n%s", cycle, errOut)
		}
		if cycle == 0 {
			checkStatusMatchesLedger(t, s, results.Counts{Succeeded: s.n})
		}
		if t.Failed() {
			return
		}
	}
}

// TestKill9AtRandomMoments kills nodepack with SIGKILL at a random moment
// of a sweep of short runs, 20 times over the same output directory, with
// two CPU hogs running: each time no process of any run's tree is left
// (group members and setsid escapees included), and in the end every run
// has succeeded exactly once by the ledger.
func TestKill9AtRandomMoments(t *testing.T) {
	cycles := 20
	if testing.Short() {
		cycles = 4
	}
	startHogs(t, 2)
	dir := t.TempDir()
	token := tokenFor("np-random-", dir)
	const n = 60
	var tasks strings.Builder
	for i := range n {
		fmt.Fprintf(&tasks, "(exec -a %[1]s sleep 0.0$((RANDOM%%5))) & p=$!; setsid bash -c 'exec -a %[1]s sleep 30' & sleep 0.0$((RANDOM%%3)); wait $p # %[2]d\n", token, i)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--parallel", "4", "--gpus", "none", "-o", out, file}
	t.Cleanup(func() {
		for _, pid := range processesWith(token) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for cycle := range cycles {
		cmd := nodepackCommand(t, nil, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A random moment, not a synchronisation: anywhere from before the
		// first run to the middle of the sweep.
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		waitGone(t, token, 2*time.Second)
		if t.Failed() {
			t.Fatalf("cycle %d", cycle)
		}
	}
	if code, _, errOut := runCLI(t, args...); code != exitOK {
		t.Fatalf("last run: exit %d:\n%s", code, errOut)
	}
	succeeded := map[string]int{}
	b, err := os.ReadFile(filepath.Join(out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		var rec ledger.Finished
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("ledger line %q: %v", line, err)
		}
		if rec.Type == ledger.TypeFinished && rec.Reason == run.OK {
			succeeded[rec.ID]++
		}
	}
	if len(succeeded) != n {
		t.Errorf("%d runs succeeded, want %d", len(succeeded), n)
	}
	for id, count := range succeeded {
		if count != 1 {
			t.Errorf("run %s succeeded %d times by the ledger", id, count)
		}
	}
	waitGone(t, token, 2*time.Second)
}

// startHogs starts n processes that spin on a CPU until the test ends,
// and ends them by pid.
func startHogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			hog.Process.Kill()
			hog.Wait()
		})
	}
}

// TestSIGTERMThenRerun: SIGTERM mid-sweep writes interrupted records, and
// the rerun runs exactly the interrupted and never-started runs, 20 times.
func TestSIGTERMThenRerun(t *testing.T) {
	cycles := 20
	if testing.Short() {
		cycles = 3
	}
	for cycle := range cycles {
		s := newGatedSweep(t, 5)
		p, stderr := s.start(t)
		p.Signal(syscall.SIGTERM)
		p.wait()
		if !strings.Contains(stderr(), "2 interrupted") {
			t.Fatalf("cycle %d: first run:\n%s", cycle, stderr())
		}
		first := s.ledger(t)
		var interrupted []string
		first.LastAll(func(i int, _ *ledger.Started, fin *ledger.Finished) error {
			if r := first.At(i); r.State == ledger.StateInterrupted && fin != nil && fin.Reason == run.Interrupted {
				interrupted = append(interrupted, r.ID)
			}
			return nil
		})
		if len(interrupted) != 2 || first.End == nil || !strings.Contains(first.End.Note, "SIGTERM") {
			t.Fatalf("cycle %d: interrupted records for %v, end %+v; want 2 and an end record", cycle, interrupted, first.End)
		}
		if cycle == 0 {
			checkStatusMatchesLedger(t, s, results.Counts{Pending: 1, Interrupted: 2, Succeeded: 2})
		}

		s.open(t)
		if code, _, errOut := runCLI(t, s.args()...); code != exitOK {
			t.Fatalf("cycle %d: rerun exit %d:\n%s", cycle, code, errOut)
		}
		second := s.ledger(t)
		var rerun []string
		for i := range second.Len() {
			if run := second.At(i); run.Session == len(second.Sessions)-1 {
				rerun = append(rerun, run.ID)
			}
		}
		if first.Len() != 4 {
			t.Fatalf("cycle %d: the first session started %d runs, want 4", cycle, first.Len())
		}
		want := append(interrupted, s.lastID(t, first)) // and the one never started
		slices.Sort(want)
		slices.Sort(rerun)
		if !slices.Equal(rerun, want) {
			t.Errorf("cycle %d: rerun ran %v, want the interrupted and the unstarted ones %v", cycle, rerun, want)
		}
		for id, n := range s.completions(t) {
			if n != 1 {
				t.Errorf("cycle %d: run %s completed %d times", cycle, id, n)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// lastID is the id of the run the first session never started.
func (s *gatedSweep) lastID(t *testing.T, first *ledger.Log) string {
	t.Helper()
	code, stdout, _ := runCLI(t, "run", "--dry-run", "--gpus", "none", s.file)
	if code != exitOK {
		t.Fatalf("dry run: exit %d", code)
	}
	for line := range strings.Lines(stdout) {
		id, _, _ := strings.Cut(line, "\t")
		if _, ok := first.Find(id); !ok && id != "" {
			return id
		}
	}
	t.Fatal("every run was started")
	return ""
}

// TestTornLastLine: a record cut off by a crash is ignored by status (a
// line being written) and, with a warning, by the resume, which runs the
// rest.
func TestTornLastLine(t *testing.T) {
	s := newGatedSweep(t, 3)
	s.open(t)
	if code, _, errOut := runCLI(t, s.args()...); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	path := filepath.Join(s.out, "ledger.jsonl")
	b, _ := os.ReadFile(path)
	// Drop the end record and the last finished record, and leave half of
	// the latter.
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	last := lines[len(lines)-2]
	torn := strings.Join(lines[:len(lines)-2], "") + last[:len(last)/2]
	if err := os.WriteFile(path, []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "status", "--json", s.out)
	var doc results.Status
	if code != exitOK || json.Unmarshal([]byte(stdout), &doc) != nil || !doc.Shards[0].Torn {
		t.Fatalf("status on a torn ledger: exit %d\n%s", code, stdout)
	}
	code, _, errOut := runCLI(t, s.args()...)
	if code != exitOK || !strings.Contains(errOut, "left out an unfinished last line") || !strings.Contains(errOut, "1 interrupted (run again)") {
		t.Errorf("rerun: exit %d:\n%s", code, errOut)
	}
	if _, err := ledger.ReadFile(path, ledger.ReadOptions{}); err != nil {
		t.Errorf("the ledger after the resume: %v", err)
	}
}

// TestLedgerCorruptionIsAnError: a bad line that is not the last is an
// error naming file and line, before anything runs.
func TestLedgerCorruptionIsAnError(t *testing.T) {
	s := newGatedSweep(t, 3)
	s.open(t)
	if code, _, errOut := runCLI(t, s.args()...); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	path := filepath.Join(s.out, "ledger.jsonl")
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	lines[2] = "{\"type\":\"started\", garbage\n"
	os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644)
	os.Remove(filepath.Join(s.dir, "DONE"))
	for _, args := range [][]string{s.args(), {"status", s.out}} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, path+":3:") {
			t.Errorf("nodepack %s: exit %d, stderr %q; want 2 naming %s:3", args[0], code, errOut, path)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "DONE")); err == nil {
		t.Error("a run started despite the corrupt ledger")
	}
}

func TestRunUnwritableOutput(t *testing.T) {
	s := newGatedSweep(t, 2)
	notDir := writeFile(t, s.dir, "file", "")
	s.out = filepath.Join(notDir, "out")
	code, _, errOut := runCLI(t, s.args()...)
	if code != exitUsage || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "not a directory") {
		t.Errorf("exit %d, stderr %q; want 2 and one line", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "DONE")); err == nil {
		t.Error("a run started")
	}
}

// TestRestartAndRetryFailed: --retry-failed reruns the failed run only;
// --restart keeps a backup and runs everything.
func TestRestartAndRetryFailed(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	file := writeFile(t, dir, "tasks.txt", fmt.Sprintf("echo a >> %[1]s/A\necho b >> %[1]s/B; exit 3\n", dir))
	args := []string{"run", "-q", "--gpus", "none", "-o", out}
	count := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.Count(string(b), "\n")
	}
	steps := []struct {
		description string
		flags       []string
		wantCode    int
		wantA       int // lines in A and B afterwards
		wantB       int
		wantErr     string
	}{
		{"first run", nil, exitFailed, 1, 1, "1 failed"},
		{"resume skips both", nil, exitFailed, 1, 1, "skipped 2 runs done before: 1 succeeded, 1 failed"},
		{"--retry-failed reruns the failure", []string{"--retry-failed"}, exitFailed, 1, 2, "ran again 1 failed run"},
		{"--restart reruns everything", []string{"--restart"}, exitFailed, 2, 3, "the old ledger is now"},
	}
	attempt2 := func() int { // logs with a header for attempt 2
		logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
		n := 0
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			n += strings.Count(string(b), "--- nodepack: attempt 2 ---")
		}
		return n
	}
	for i, step := range steps {
		code, _, errOut := runCLI(t, append(append(slices.Clone(args), step.flags...), file)...)
		// The failed run rerun by --retry-failed keeps counting attempts
		// and appends to its log; --restart starts the logs afresh.
		if want := map[bool]int{true: 1, false: 0}[i == 2]; attempt2() != want {
			t.Errorf("%s: %d logs with an attempt 2 header, want %d", step.description, attempt2(), want)
		}
		if code != step.wantCode || count("A") != step.wantA || count("B") != step.wantB || !strings.Contains(errOut, step.wantErr) {
			t.Errorf("%s: exit %d, A %d, B %d; want %d, %d, %d, stderr with %q:\n%s",
				step.description, code, count("A"), count("B"), step.wantCode, step.wantA, step.wantB, step.wantErr, errOut)
		}
	}
	if backups, _ := filepath.Glob(filepath.Join(out, "ledger.jsonl.*.bak")); len(backups) != 1 {
		t.Errorf("backups %v, want 1", backups)
	}
}

// TestStopBeforeWalltime: with the job's end near, --stop-before stops
// starting runs and stops running ones, exit 3 names the deferred runs,
// and a rerun (the requeued job) completes them.
func TestStopBeforeWalltime(t *testing.T) {
	s := newGatedSweep(t, 5)
	t.Setenv("SLURM_JOB_ID", "4242")
	t.Setenv("SLURM_JOB_END_TIME", strconv.FormatInt(time.Now().Add(8*time.Second).Unix(), 10))
	var code int
	var errOut string
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, _, errOut = runCLI(t, s.args("--stop-before", "6s")...)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("nodepack did not stop before the job's end")
	}
	if code != exitDeferred || !strings.Contains(errOut, "3 runs deferred to the requeue") {
		t.Fatalf("exit %d, want 3 and 3 deferred runs:\n%s", code, errOut)
	}
	log := s.ledger(t)
	if log.End == nil || log.End.Deferred != 3 {
		t.Errorf("end record %+v, want 3 deferred", log.End)
	}
	os.Unsetenv("SLURM_JOB_END_TIME")
	s.open(t)
	if code, _, errOut := runCLI(t, s.args()...); code != exitOK {
		t.Fatalf("rerun: exit %d:\n%s", code, errOut)
	}
	if done := s.completions(t); len(done) != 5 {
		t.Errorf("%d runs completed, want 5", len(done))
	}
}

// TestResumeWithNothingLeftSaysSo: a rerun of a sweep that is done says
// there is nothing left, not "0 runs … 0% busy".
func TestResumeWithNothingLeftSaysSo(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "t.txt", "true\necho b\n")
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks); code != exitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks)
	if code != exitOK || !strings.Contains(stderr, "nothing left to run: skipped 2 runs done before: 2 succeeded") || strings.Contains(stderr, "0 runs:") {
		t.Errorf("rerun of a done sweep: exit %d\n%s", code, stderr)
	}
}

// TestCancelSignalsRunsFirst is a scancel without Slurm: the batch system
// signals every process of the job in no order, so here each run's command
// gets SIGTERM first and nodepack 0, 0.3 and 1 s later, with two CPU hogs
// running. Task lines have the most common shape, "CMD && echo done", whose
// bash cannot exec CMD and exits 143 itself. Every run ends interrupted,
// none failed, and a plain rerun runs all of them.
func TestCancelSignalsRunsFirst(t *testing.T) {
	startHogs(t, 2)
	for _, after := range []time.Duration{0, 300 * time.Millisecond, time.Second} {
		t.Run(after.String(), func(t *testing.T) {
			dir := t.TempDir()
			const n = 4
			var lines []string
			for i := range n {
				// The command writes its pid and waits, until a file says the
				// work is quick (the rerun).
				lines = append(lines, fmt.Sprintf("sh -c 'test -e %[1]s/quick || { echo $$ > %[1]s/pid.%[2]d; exec sleep 60; }' && echo done %[2]d >> %[1]s/done", dir, i))
			}
			file := writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\n")
			out := filepath.Join(dir, "out")
			args := []string{"run", "-q", "--gpus", "none", "--parallel", strconv.Itoa(n), "-o", out, file}
			cmd := nodepackCommand(t, nil, args...)
			var stderr syncBuilder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			for i := range n {
				path := filepath.Join(dir, fmt.Sprintf("pid.%d", i))
				if !waitUntil(time.Minute, func() bool { b, err := os.ReadFile(path); return err == nil && strings.HasSuffix(string(b), "\n") }) {
					cmd.Process.Kill()
					t.Fatalf("run %d did not start:\n%s", i, stderr.String())
				}
				b, _ := os.ReadFile(path)
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGTERM)
			}
			time.Sleep(after) // the batch system's order, not a synchronisation
			cmd.Process.Signal(syscall.SIGTERM)
			err := cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 143 && !(code == 1 && after > 0) {
				// 1: every run had ended, as interrupted, before the signal came.
				t.Errorf("nodepack: %v, want exit 143 (or 1 when it had ended first):\n%s", err, stderr.String())
			}
			doc := statusDocOf(t, out)
			if doc.Counts.Interrupted != n || doc.Counts.Failed != 0 {
				t.Errorf("status after the cancel: %+v, want %d interrupted and none failed:\n%s", doc.Counts, n, stderr.String())
			}
			writeFile(t, dir, "quick", "")
			code, _, errOut := runCLI(t, args...)
			if code != exitOK || !strings.Contains(errOut, fmt.Sprintf("ran again %d interrupted runs", n)) {
				t.Errorf("rerun: exit %d, want 0 with every run run again:\n%s", code, errOut)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "done"))
			if got := strings.Count(string(b), "done"); got != n {
				t.Errorf("%d runs done after the rerun, want %d", got, n)
			}
		})
	}
}

// TestRestartStartsRunsFromScratch: --restart runs every run from its
// first step, though its directory holds the checkpoints and metrics of
// the sweep before: those are set aside (renamed, not deleted), so that
// no run resumes from a checkpoint or is judged by points that are not
// its own. A checkpoint folder that is a symbolic link to scratch (the
// usual HPC layout) is set aside as a link: the link is renamed, what it
// points to is left whole, the run gets a new folder, and nodepack says so.
func TestRestartStartsRunsFromScratch(t *testing.T) {
	for _, linked := range []bool{false, true} {
		t.Run(map[bool]string{false: "a folder", true: "a link to scratch"}[linked], func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			script, _ := filepath.Abs("../../examples/sweeps/checkpointing.py")
			args := []string{"run", "-q", "--gpus", "none", "-o", out, "--sweep", "--", "python3", script, "--steps", "6", "--every", "2", "--step_seconds", "0.01"}
			firstSteps := func() []float64 {
				log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var firsts []float64
				log.LastAll(func(i int, _ *ledger.Started, fin *ledger.Finished) error {
					if fin != nil && fin.Steps != nil {
						firsts = append(firsts, fin.Steps.First)
					}
					return nil
				})
				return firsts
			}
			if code, _, stderr := runCLI(t, args...); code != exitOK || fmt.Sprint(firstSteps()) != "[1]" {
				t.Fatalf("first run: exit %d, first steps %v\n%s", code, firstSteps(), stderr)
			}
			scratch := filepath.Join(dir, "scratch", "ckpt")
			if linked {
				folders, _ := filepath.Glob(filepath.Join(out, "runs", "*", "checkpoints"))
				if len(folders) != 1 {
					t.Fatalf("checkpoint folders %v", folders)
				}
				os.MkdirAll(filepath.Dir(scratch), 0o755)
				if err := os.Rename(folders[0], scratch); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(scratch, folders[0]); err != nil {
					t.Fatal(err)
				}
			}
			code, _, stderr := runCLI(t, append(args[:6:6], append([]string{"--restart"}, args[6:]...)...)...)
			if code != exitOK || fmt.Sprint(firstSteps()) != "[1]" {
				t.Errorf("--restart: exit %d, first steps %v; want the run from step 1, not from its old checkpoint\n%s", code, firstSteps(), stderr)
			}
			old := "checkpoints.*.old/state.json"
			if linked {
				old = "checkpoints.*.old"
				if _, err := os.Stat(filepath.Join(scratch, "state.json")); err != nil {
					t.Errorf("the old checkpoint on scratch: %v", err)
				}
				if !strings.Contains(stderr, "its checkpoints folder was a symbolic link, which was set aside as checkpoints.") {
					t.Errorf("nodepack did not say it set the link aside:\n%s", stderr)
				}
			}
			for _, pattern := range []string{old, "metrics.jsonl.*.old"} {
				if m, _ := filepath.Glob(filepath.Join(out, "runs", "*", pattern)); len(m) != 1 {
					t.Errorf("runs/*/%s: %v, want the old one set aside", pattern, m)
				} else if st, _ := os.Lstat(m[0]); linked && pattern == old && st.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is not the link", m[0])
				}
			}
			if m, _ := filepath.Glob(filepath.Join(out, "runs", "*", "checkpoints")); len(m) != 1 {
				t.Errorf("new checkpoint folders %v", m)
			} else if st, err := os.Lstat(m[0]); err != nil || !st.IsDir() {
				t.Errorf("the run's new checkpoint folder: %v, %v", st, err)
			}
		})
	}
}
