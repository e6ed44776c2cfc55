package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/ledger"
	"golang.org/x/sys/unix"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunPinsEveryRun is the promise on this 2-CPU machine: 100
// lines with --parallel 2, each run pinned to its own slot's CPU, logs in
// run dirs, exit 0 and a summary.
func TestRunPinsEveryRun(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil || !allowed.IsSet(0) || !allowed.IsSet(1) {
		t.Skip("needs CPUs 0 and 1")
	}
	dir := t.TempDir()
	var tasks strings.Builder
	tasks.WriteString("# slot, the CPUs nodepack says, the CPUs the kernel says\n\n")
	for i := range 100 {
		fmt.Fprintf(&tasks, "echo %d $NODEPACK_SLOT $NODEPACK_CPUS $OMP_NUM_THREADS $(grep Cpus_allowed_list /proc/self/status | cut -f2)\n", i)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	out := filepath.Join(dir, "out")
	// Two CPUs whatever the machine has: one each, so one thread each.
	code, _, stderr := runCLI(t, "run", "--parallel", "2", "--gpus", "none", "--cpus", "0,1", "-o", out, file)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "100 runs: 100 succeeded, 0 failed") {
		t.Errorf("summary missing:\n%s", stderr)
	}
	logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
	if len(logs) != 100 {
		t.Fatalf("%d stdout logs, want 100", len(logs))
	}
	cpusOfSlot := map[string]string{}
	seen := map[string]bool{}
	for _, log := range logs {
		b, _ := os.ReadFile(log)
		f := strings.Fields(string(b))
		if len(f) != 5 {
			t.Fatalf("%s: %q", log, b)
		}
		seen[f[0]] = true
		slot, said, threads, pinned := f[1], f[2], f[3], f[4]
		if said != pinned || threads != "1" {
			t.Errorf("run %s in slot %s: NODEPACK_CPUS=%s OMP_NUM_THREADS=%s, pinned to %s", f[0], slot, said, threads, pinned)
		}
		if prev, ok := cpusOfSlot[slot]; ok && prev != pinned {
			t.Errorf("slot %s ran on %s and %s", slot, prev, pinned)
		}
		cpusOfSlot[slot] = pinned
	}
	if len(seen) != 100 || len(cpusOfSlot) != 2 || cpusOfSlot["0"] == cpusOfSlot["1"] {
		t.Errorf("%d distinct runs, slots %v; want 100 runs on two different CPUs", len(seen), cpusOfSlot)
	}
}

func TestRunFailuresAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "tasks.txt", "true\nexit 3\necho oops >&2; kill -ABRT $$\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", out, file)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	for _, want := range []string{"3 runs: 1 succeeded, 2 failed", "exit (exit 3, " + file + ":2)", "signal (SIGABRT, " + file + ":3)", "| oops", filepath.Join(out, "runs")} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestStopSignalFromOutsideInterrupts: a run that ends by SIGTERM, SIGINT
// or SIGHUP that nodepack did not send is interrupted, not failed, also as
// the most common task line's shell exits 128+N after its command was
// killed ("CMD && echo done"); a rerun runs it again. Deaths by other
// signals stay failures.
func TestStopSignalFromOutsideInterrupts(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		"sh -c 'kill -TERM $$' && echo done", // bash exits 143
		"sh -c 'kill -INT $$' && echo done",  // 130
		"sh -c 'kill -HUP $$' && echo done",  // 129
		"kill -TERM $$",                      // killed itself
		"kill -SEGV $$",                      // a crash: failed
	}
	file := writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", out, file)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	for _, want := range []string{"5 runs: 0 succeeded, 1 failed (1 signal), 4 interrupted", "4 runs ended by SIGTERM, SIGINT or SIGHUP that nodepack did not send", "signal (SIGSEGV, " + file + ":5)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	code, _, stderr = runCLI(t, "run", "--gpus", "none", "-o", out, file)
	if code != exitFailed || !strings.Contains(stderr, "ran again 4 interrupted runs") || !strings.Contains(stderr, "4 runs: 0 succeeded, 0 failed, 4 interrupted") {
		t.Errorf("rerun: exit %d, want 1 with the 4 interrupted runs run again:\n%s", code, stderr)
	}
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.txt", "true\n")
	nul := writeFile(t, dir, "nul.txt", "true\necho a\x00b\n")
	empty := writeFile(t, dir, "empty.txt", "# nothing\n\n")
	twice := writeFile(t, dir, "twice.txt", "true\n#nodepack gpus=1 gpus=2\ntrue\n")
	paramsTwice := writeFile(t, dir, "twice.jsonl", `{"lr": 1}`+"\n"+`{"lr": 2, "nodepack": {"cpus": 1, "cpus": 2}}`+"\n")
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"no task file", nil, "want one TASKFILE"},
		{"missing task file", []string{filepath.Join(dir, "nope.txt")}, "nope.txt"},
		{"NUL byte names file and line", []string{nul}, "nul.txt:2: line contains a NUL byte"},
		{"no commands", []string{empty}, "empty.txt: no commands"},
		{"bad --gpu-ids", []string{"--gpu-ids", "name", good}, `--gpu-ids "name"`},
		{"bad --env", []string{"--env", "NO SPACE=1", good}, `--env "NO SPACE=1"`},
		{"bad --wrap", []string{"--wrap", "ch-run 'img", good}, "unterminated single quote"},
		{"negative --timeout", []string{"--timeout", "-1s", good}, "--timeout -1s"},
		{"plan does not fit", []string{"--gpus", "none", "--cpus", "0", "--cpus-per-run", "64", good}, "--cpus-per-run"},
		{"a request key twice in a task file", []string{"--gpus", "none", twice}, "twice.txt:2: #nodepack: gpus given twice (gpus=1, then gpus=2)"},
		{"a request key twice in a params line", []string{"--gpus", "none", "--params", paramsTwice, "--", "echo"}, "twice.jsonl:2"},
		{"a request key twice in a --request rule", []string{"--gpus", "none", "--request", "*: cpus=1 cpus=1", "--sweep", "--", "echo", "a=1,2"}, "cpus given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := runCLI(t, append([]string{"run", "-o", out}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line containing %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output directory created although nothing should start")
			}
		})
	}
	// A start refused where the ledger cannot be made is one line too: the
	// lines before the start (the output directory, notes) are not said.
	if code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", "/proc/nodepack-cannot-be-here", good); code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "open ledger") {
		t.Errorf("a ledger that cannot be opened: exit %d, %q; want 2 and one line", code, stderr)
	}
}

// tokenFor is a token for the processes of a test's sweep in dir (one of
// its t.TempDir()s), unique among the tests that run at once: the base
// of a TempDir alone ("001") is every test's.
// startNodepack starts this binary as nodepack with args, its stderr
// kept, and kills it and every process whose command line holds token
// when the test ends.
func startNodepack(t *testing.T, token string, args ...string) (*exec.Cmd, *syncBuilder) {
	t.Helper()
	cmd := nodepackCommand(t, nil, args...)
	stderr := &syncBuilder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		for _, pid := range processesWith(token) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd, stderr
}

func tokenFor(prefix, dir string) string {
	return prefix + filepath.Base(filepath.Dir(dir)) + "-" + filepath.Base(dir)
}

// processesWith lists the pids of live (non-zombie) processes whose command
// line contains token.
func processesWith(token string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(token)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// startSweep starts nodepack (this test binary) on a task file whose runs
// sleep in ways that try to escape, and waits until both slots are running.
func startSweep(t *testing.T, extra ...string) (*exec.Cmd, *syncBuilder, string) {
	t.Helper()
	dir := t.TempDir()
	token := tokenFor("np-orphan-", dir) // unique in every process of this sweep
	ready := filepath.Join(dir, "ready")
	// exec -a puts the token in every process's own command line, so /proc
	// finds them all: a setsid grandchild, and a run that ignores SIGTERM.
	tasks := fmt.Sprintf(
		"setsid bash -c 'exec -a %[1]s sleep 300' & touch %[2]s.$NODEPACK_SLOT; exec -a %[1]s sleep 301\n"+
			"trap '' TERM; touch %[2]s.$NODEPACK_SLOT; (exec -a %[1]s sleep 302); exec -a %[1]s sleep 303\n"+
			"exec -a %[1]s sleep 304\n", token, ready)
	file := writeFile(t, dir, "tasks.txt", tasks)
	args := append([]string{"run", "--parallel", "2", "--gpus", "none", "-o", filepath.Join(dir, "out")}, extra...)
	cmd, stderr := startNodepack(t, token, append(args, file)...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, _ := filepath.Glob(ready + ".*")
		if len(a) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs did not start:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Both runs' shells and sleeps, and the setsid grandchild: the ready
	// files come before the last of them forks.
	for n := len(processesWith(token)); n < 4; n = len(processesWith(token)) {
		if time.Now().After(deadline) {
			t.Fatalf("found %d processes of the sweep, want at least 4", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd, stderr, token
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// TestRunSIGTERMLeavesNothing: SIGTERM to nodepack ends every process of
// every run's tree, the setsid grandchild and a run that ignores SIGTERM
// included, and nodepack exits 143.
func TestRunSIGTERMLeavesNothing(t *testing.T) {
	cmd, stderr, token := startSweep(t, "--grace", "1s")
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 143 {
		t.Errorf("exit %d, want 143:\n%s", code, stderr)
	}
	if left := processesWith(token); len(left) > 0 {
		t.Errorf("processes left after nodepack exited: %v", left)
	}
	if !strings.Contains(stderr.String(), "2 interrupted") || !strings.Contains(stderr.String(), "stopped by SIGTERM") {
		t.Errorf("summary:\n%s", stderr)
	}
}

// TestRunSecondSIGINTKillsAtOnce: the first Ctrl-C starts a 60 s grace
// period; the second kills without waiting for it. Exit 130.
func TestRunSecondSIGINTKillsAtOnce(t *testing.T) {
	cmd, stderr, token := startSweep(t, "--grace", "60s")
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, cmd); code != 130 {
		t.Errorf("exit %d, want 130:\n%s", code, stderr)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("took %v: the second SIGINT did not cut the 60 s grace short", waited)
	}
	if left := processesWith(token); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

func TestRunStdin(t *testing.T) {
	dir := t.TempDir()
	cmd := nodepackCommand(t, nil, "run", "--gpus", "none", "--live", "-o", filepath.Join(dir, "out"), "-")
	cmd.Stdin = strings.NewReader("echo from-stdin-1\necho from-stdin-2\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v", err)
	}
	var lines []string
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	var texts []string
	for _, l := range lines {
		if _, text, ok := strings.Cut(l, "] "); ok && strings.HasPrefix(l, "[") {
			texts = append(texts, text)
		}
	}
	slices.Sort(texts)
	if !slices.Equal(texts, []string{"from-stdin-1", "from-stdin-2"}) {
		t.Errorf("--live output %q, want each line prefixed with [run-id]", lines)
	}
}

// TestExitStatus: how a sweep ended decides nodepack's exit status.
func TestExitStatus(t *testing.T) {
	failedRun := execute.Summary{Runs: 2, Succeeded: 1, Failed: 1}
	tests := []struct {
		description string
		out         runner.Outcome
		err         error // Wait's
		sig         syscall.Signal
		want        int
	}{
		{"all succeeded", runner.Outcome{Summary: execute.Summary{Runs: 3, Succeeded: 3}}, nil, 0, exitOK},
		{"a run failed", runner.Outcome{Summary: failedRun}, nil, 0, exitFailed},
		{"a run failed before and was skipped", runner.Outcome{Resumed: ledger.ResumeCounts{SkippedFailed: 1}}, nil, 0, exitFailed},
		{"SIGTERM", runner.Outcome{Summary: failedRun}, errors.New("interrupted"), syscall.SIGTERM, 143},
		{"SIGHUP", runner.Outcome{}, nil, syscall.SIGHUP, 129},
		{"a warning and a Grid Engine requeue", runner.Outcome{Requeued: true, RequeueExit: 99}, nil, syscall.SIGUSR2, 99},
		{"a warning and a Slurm requeue", runner.Outcome{Requeued: true}, nil, syscall.SIGUSR1, 138},
		{"--stop-before deferred runs", runner.Outcome{Summary: execute.Summary{Drained: true}, Left: 3}, nil, 0, exitDeferred},
		{"--stop-before with nothing left", runner.Outcome{Summary: execute.Summary{Drained: true, Runs: 1, Succeeded: 1}}, nil, 0, exitOK},
		{"a bad line further down, nothing ran", runner.Outcome{}, errors.New("tasks.txt:9: bad"), 0, exitUsage},
		{"a bad line further down after some runs", runner.Outcome{Summary: execute.Summary{Runs: 1, Succeeded: 1}}, errors.New("bad"), 0, exitFailed},
		{"the ledger could not be written", runner.Outcome{Summary: execute.Summary{Runs: 1, Succeeded: 1}}, &runner.LedgerError{Err: errors.New("disk"), Lost: true}, 0, exitFailed},
		{"the ledger was deleted", runner.Outcome{Summary: execute.Summary{Runs: 1, Succeeded: 1, Drained: true}, Left: 2}, &runner.LedgerError{Err: errors.New("deleted")}, 0, exitFailed},
		{"the ledger was deleted, nothing ran", runner.Outcome{Summary: execute.Summary{Drained: true}, Left: 2}, errors.Join(nil, &runner.LedgerError{Err: errors.New("deleted")}), 0, exitFailed},
		{"a requeue that failed is no failure of the sweep", runner.Outcome{Summary: execute.Summary{Drained: true, Runs: 1, Succeeded: 1}}, errors.Join(nil, &runner.RequeueError{Err: errors.New("scontrol")}), 0, exitOK},
	}
	for _, tc := range tests {
		if got := exitStatus(tc.out, tc.err, tc.sig); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.description, got, tc.want)
		}
	}
}

// TestHugeParallelCostsWhatTheRunsUse runs 3 runs with --parallel
// 1000000: they all run at once, and the plan the ledger records is the
// first wave of 3 slots, not a million (which took half a gigabyte).
func TestHugeParallelCostsWhatTheRunsUse(t *testing.T) {
	dir := t.TempDir()
	// Each run waits for the other two to have started: only together can
	// they end.
	var tasks strings.Builder
	for i := range 3 {
		fmt.Fprintf(&tasks, "touch %s/started.%d; while [ $(ls %s | grep -c started) -lt 3 ]; do sleep 0.01; done\n", dir, i, dir)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runCLI(t, "run", "--parallel", "1000000", "--gpus", "none", "--timeout", "60s", "-o", out, file)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var plan pack.PlanDoc
	if err := json.Unmarshal(log.Header().Plan, &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Slots) != 3 || !strings.HasPrefix(strings.Join(plan.Warnings, ";"), "--parallel 1000000: 1000000 runs at once share") {
		t.Errorf("the ledger's plan has %d slots, warnings %q; want 3 and the sharing of a million", len(plan.Slots), plan.Warnings)
	}
}

// TestGraceZeroMeansNone: --grace 0 sends SIGKILL right after SIGTERM; it
// is not silently the default of 10 s. The run ignores SIGTERM, so only
// the SIGKILL ends it: well before a 10 s grace would.
func TestGraceZeroMeansNone(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "env --ignore-signal=TERM sleep 60\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "--grace", "0", "--timeout", "1s", "-o", out, tasks)
	// The attempt's own duration, from its start to its end: the 1 s of
	// its timeout, not 1 s and a 10 s grace (however slowly nodepack
	// itself starts on a loaded machine).
	log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var took float64
	log.LastAll(func(_ int, _ *ledger.Started, fin *ledger.Finished) error {
		if fin != nil {
			took = fin.Seconds
		}
		return nil
	})
	if code != exitFailed || took == 0 || took >= 10 || !strings.Contains(stderr, "timeout") {
		t.Errorf("exit %d, the run took %v s, want 1 (timeout) well within the 10 s of the default grace\n%s", code, took, stderr)
	}
}

// TestSummaryNamesTheDefaultOutput: the summary's commands name the
// output directory nodepack chose itself when -o was not given, not an
// empty one.
func TestSummaryNamesTheDefaultOutput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "f.txt", "exit 3\n")
	cmd := nodepackCommand(t, nil, "run", "-q", "--gpus", "none", "f.txt")
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "''") || !strings.Contains(string(out), "nodepack retry nodepack-f-") || !strings.Contains(string(out), "status --failed nodepack-f-") {
		t.Errorf("the summary does not name the output directory:\n%s", out)
	}
}

// TestGPUMemShareWithoutReadings: where the GPUs' memory is known (an
// inventory) but each run's own use cannot be read (no driver here), runs
// sharing a GPU by --gpu-mem-per-run do not wait for readings that cannot
// come, one after another for the whole --settle-timeout: three runs that
// each wait until all three have started all succeed, and run says why,
// once.
func TestGPUMemShareWithoutReadings(t *testing.T) {
	dir := t.TempDir()
	inventory := fakeGPUInventory(t, dir)
	var tasks strings.Builder
	for i := range 3 {
		fmt.Fprintf(&tasks, "touch %s/started.%d; while [ $(ls %s | grep -c started) -lt 3 ]; do sleep 0.01; done\n", dir, i, dir)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	code, _, stderr := runCLI(t, "run", "--inventory", inventory, "--gpu-mem-per-run", "2GiB", "--cpus-per-run", "0", "--timeout", "10s",
		"-o", filepath.Join(dir, "out"), file)
	if code != exitOK {
		t.Fatalf("exit %d: the runs waited for each other's GPU memory to settle:\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "the GPU memory of each run cannot be read here (NVML is not available)"); n != 1 {
		t.Errorf("said %d times why runs do not wait for each other's GPU memory, want once:\n%s", n, stderr)
	}
}

// fakeGPUInventory writes dir/node.json: this node with one GPU of 80 GiB
// that no driver answers for (CUDA_VISIBLE_DEVICES=0, which the test sets),
// and returns its path. It skips the test where a driver answers.
func fakeGPUInventory(t *testing.T, dir string) string {
	t.Helper()
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	code, saved, stderr := runCLI(t, "detect", "--json")
	var n resources.Node
	if code != exitOK || json.Unmarshal([]byte(saved), &n) != nil || len(n.GPUs) != 1 {
		t.Fatalf("detect --json: exit %d: %s", code, stderr)
	}
	if n.GPUSource == "nvml" {
		t.Skip("a GPU driver answers here: this test gives nodepack a GPU no driver answers for")
	}
	n.GPUs[0].MemoryBytes = 80 << 30
	path := filepath.Join(dir, "node.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := n.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMPSOnWithoutTheDaemon: --mps on where nvidia-cuda-mps-control is not
// is refused before anything starts, in one line; a dry run (submit's
// check on a login node) is not, since it may list runs for another
// machine.
func TestMPSOnWithoutTheDaemon(t *testing.T) {
	if _, err := exec.LookPath("nvidia-cuda-mps-control"); err == nil {
		t.Skip("nvidia-cuda-mps-control is here")
	}
	dir := t.TempDir()
	file := writeFile(t, dir, "tasks.txt", "touch "+filepath.Join(dir, "ran")+"\n")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "--mps", "on", "-o", filepath.Join(dir, "out"), file)
	if _, err := os.Stat(filepath.Join(dir, "ran")); code != exitUsage || err == nil || !strings.Contains(stderr, "mps on: no nvidia-cuda-mps-control here") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, ran %v: %s; want exit 2, one line, nothing run", code, err == nil, stderr)
	}
	if code, _, stderr := runCLI(t, "run", "--gpus", "none", "--mps", "on", "--dry-run", file); code != exitOK {
		t.Errorf("a dry run: exit %d: %s", code, stderr)
	}
}

// TestRunsPerGPUAuto: --runs-per-gpu auto starts one run per GPU, and adds
// one more while the runs' steps per second on the GPU rise (here each
// run's own speed does not fall with its neighbours, so every step pays),
// records each decision in the ledger and says it; runs then share the
// GPU. No GPU memory can be read here: the rule goes on by progress alone.
func TestRunsPerGPUAuto(t *testing.T) {
	dir := t.TempDir()
	inventory := fakeGPUInventory(t, dir)
	var tasks strings.Builder
	for range 8 {
		tasks.WriteString(`for i in $(seq 50); do echo "{\"step\": $i}" >> "$NODEPACK_METRICS"; sleep 0.05; done` + "\n")
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "--inventory", inventory, "--runs-per-gpu", "auto", "--density-window", "300ms", "--timeout", "60s", "-o", out, file)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var decisions []string
	type span struct{ start, end time.Time }
	spans := map[string]*span{}
	for line := range strings.Lines(string(b)) {
		var rec struct {
			Type     string    `json:"type"`
			Time     time.Time `json:"time"`
			ID       string    `json:"id"`
			From, To int
			Request  string `json:"request"`
			Measured []struct {
				Runs int `json:"runs"`
			} `json:"measured"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec.Type {
		case "density":
			decisions = append(decisions, fmt.Sprintf("%d→%d", rec.From, rec.To))
			if len(rec.Measured) == 0 {
				t.Errorf("a density record without what it measured: %s", line)
			}
		case "started":
			spans[rec.ID] = &span{start: rec.Time}
			if !strings.HasPrefix(rec.Request, "gpus=") || strings.Contains(rec.Request, "auto") {
				t.Errorf("a run started with %q: want its share made concrete", rec.Request)
			}
		case "finished":
			spans[rec.ID].end = rec.Time
		}
	}
	if len(decisions) == 0 || decisions[0] != "1→2" {
		t.Fatalf("density decisions %q: want 1→2 first\n%s\n%s", decisions, stderr, b)
	}
	most := 0
	for _, a := range spans {
		n := 0
		for _, b := range spans {
			if !b.start.After(a.start) && b.end.After(a.start) {
				n++
			}
		}
		most = max(most, n)
	}
	if most < 2 {
		t.Errorf("at most %d run at once on the one GPU after %q", most, decisions)
	}
	if !strings.Contains(stderr, "--runs-per-gpu auto: ") || !strings.Contains(stderr, "now at 2 runs per GPU") {
		t.Errorf("run did not say its density decisions:\n%s", stderr)
	}
	t.Logf("decisions %q, at most %d runs at once", decisions, most)
}
