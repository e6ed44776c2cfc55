package main

// Tests for "no silent wrong results": each reproduces a way nodepack once
// reported success, or skipped a run, that had not really run with the
// sweep's definition.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
)

// doneIn counts the lines of dir/DONE by content.
func doneIn(t *testing.T, dir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "DONE"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		counts[l]++
	}
	return counts
}

// TestPipedTaskFileRuns: a task file that is a pipe, /dev/stdin, process
// substitution or "-" runs every line, for run, plan and --dry-run alike.
func TestPipedTaskFileRuns(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	tasks := "echo one >> DONE\necho two >> DONE\n"
	tests := []struct {
		description string
		arg         string
		shell       string // a bash command line that feeds nodepack; NP stands for it
	}{
		{"standard input as -", "-", `printf '%s' "$TASKS" | NP -`},
		{"/dev/stdin", "/dev/stdin", `printf '%s' "$TASKS" | NP /dev/stdin`},
		{"process substitution", "<(…)", `NP <(printf '%s' "$TASKS")`},
		{"a FIFO", "fifo", `mkfifo fifo; (printf '%s' "$TASKS" > fifo &); NP fifo`},
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			for _, mode := range []struct {
				args string
				want string // in the output
			}{
				{"run --gpus none -o out", "2 runs: 2 succeeded"},
				{"run --gpus none --dry-run", "dry run: 2 runs"},
				{"plan --gpus none", "runs: 2"},
			} {
				dir := t.TempDir()
				np := exe + " " + mode.args
				cmd := exec.Command("bash", "-c", strings.ReplaceAll(tc.shell, "NP", np))
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "NODEPACK_TEST_AS_MAIN=1", "TASKS="+tasks)
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), mode.want) {
					t.Errorf("%s: %v\n%s\nwant %q", mode.args, err, out, mode.want)
				}
				if strings.HasPrefix(mode.args, "run --gpus none -o") {
					if done := doneIn(t, dir); done["one"] != 1 || done["two"] != 1 {
						t.Errorf("runs done: %v, want one and two once each", done)
					}
				}
			}
		})
	}
}

// TestOutputDirectoryHoldsOneSweep: sweeps that differ in their source,
// command, --env or --wrap never share an output directory; the same sweep
// grown resumes; a sweep that lost runs leaves them out of its counts.
func TestOutputDirectoryHoldsOneSweep(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	grid := writeFile(t, dir, "params.yml", "a: [1, 2]\n")
	tasks := writeFile(t, dir, "tasks.txt", "echo a >> "+dir+"/DONE\necho b >> "+dir+"/DONE\n")
	other := writeFile(t, dir, "other.txt", "echo c >> "+dir+"/DONE\n")
	run := func(args ...string) (int, string) {
		t.Helper()
		code, _, stderr := runCLI(t, append([]string{"run", "-q", "--gpus", "none", "-o", out}, args...)...)
		return code, stderr
	}
	if code, stderr := run("--grid", grid, "--", "echo"); code != exitOK {
		t.Fatalf("grid: exit %d\n%s", code, stderr)
	}
	refusals := []struct {
		description string
		args        []string
		want        string
	}{
		{"a sweep where a grid ran", []string{"--sweep", "--", "echo", "a=1,2"}, "the source was a grid file, now a sweep command"},
		{"a task file where a grid ran", []string{tasks}, "the source was a grid file, now a task file"},
		{"another command", []string{"--grid", grid, "--", "printf", "%s"}, `the command was ["echo"], now ["printf" "%s"]`},
		{"--env added", []string{"--env", "X=1", "--grid", grid, "--", "echo"}, `the environment was none, now ["X=1"]`},
		{"--wrap added", []string{"--wrap", "env", "--grid", grid, "--", "echo"}, `the wrapper was none, now ["env"]`},
		{"sharded where it was not", []string{"--shard", "0/2", "--grid", grid, "--", "echo"}, "the sweep had 1 shards, now 2"},
	}
	for _, tc := range refusals {
		code, stderr := run(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, out+" holds another sweep: "+tc.want) || !strings.Contains(stderr, "--restart") ||
			strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line with %q", tc.description, code, stderr, tc.want)
		}
	}
	// The grid grows: the two runs done are skipped, the new one runs.
	writeFile(t, dir, "params.yml", "a: [1, 2, 3]\n")
	if code, stderr := run("--grid", grid, "--", "echo"); code != exitOK || !strings.Contains(stderr, "skipped 2 runs done before") {
		t.Errorf("grown grid: exit %d\n%s", code, stderr)
	}
	// Its walk stopped at the runs the ledger knew; the rest was counted.
	if doc := statusDocOf(t, out); doc.Total == nil || *doc.Total != 3 || doc.Counts != (results.Counts{Succeeded: 3}) {
		t.Errorf("status after the growth: total %v (nil: unknown), counts %+v; want 3 runs, 3 succeeded", derefOr(doc.Total, -1), doc.Counts)
	}
	// It shrinks: the run that left is retired, and status adds up.
	writeFile(t, dir, "params.yml", "a: [1, 3]\n")
	if code, stderr := run("--grid", grid, "--", "echo"); code != exitOK || !strings.Contains(stderr, "1 run of the ledger is no longer part of this sweep") {
		t.Errorf("shrunk grid: exit %d\n%s", code, stderr)
	}
	doc := statusDocOf(t, out)
	if doc.Total == nil || *doc.Total != 2 || doc.Counts != (results.Counts{Succeeded: 2}) {
		t.Errorf("status after the shrink: total %v, counts %+v; want 2 runs, 2 succeeded", doc.Total, doc.Counts)
	}
	// A task file: refused in the grid's directory, fine in its own; one
	// that shares no run with what its directory holds is another sweep.
	os.RemoveAll(out)
	if code, stderr := run(tasks); code != exitOK {
		t.Fatalf("tasks: %d\n%s", code, stderr)
	}
	if code, stderr := run(other); code != exitUsage || !strings.Contains(stderr, `the task file was "tasks.txt", now "other.txt"`) {
		t.Errorf("another task file: exit %d\n%s", code, stderr)
	}
	writeFile(t, dir, "tasks.txt", "echo x >> "+dir+"/DONE\n")
	if code, stderr := run(tasks); code != exitUsage || !strings.Contains(stderr, "none of the 2 runs in ledger.jsonl is part of this sweep") {
		t.Errorf("a rewritten task file: exit %d\n%s", code, stderr)
	}
	if code, stderr := run("--restart", tasks); code != exitOK {
		t.Errorf("--restart: exit %d\n%s", code, stderr)
	}
	if done := doneIn(t, dir); done["c"] != 0 || done["x"] != 1 {
		t.Errorf("runs done %v: a refused sweep ran something", done)
	}
}

// statusDocOf runs status --json on dir.
func statusDocOf(t *testing.T, dir string) results.Status {
	t.Helper()
	code, stdout, stderr := runCLI(t, "status", "--json", dir)
	var doc results.Status
	if code != exitOK || json.Unmarshal([]byte(stdout), &doc) != nil {
		t.Fatalf("status: exit %d\n%s%s", code, stdout, stderr)
	}
	return doc
}

// TestChangedEnvIsNoSilentSkip: the same task under another --env is a new
// sweep (its own default directory) or, in the same directory, a refusal;
// never a skip.
func TestChangedEnvIsNoSilentSkip(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", `echo "$X" >> `+dir+"/DONE\n")
	for _, x := range []string{"first", "second"} {
		cmd := nodepackCommand(t, nil, "run", "-q", "--gpus", "none", "--env", "X="+x, tasks)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("X=%s: %v\n%s", x, err, out)
		}
	}
	if done := doneIn(t, dir); done["first"] != 1 || done["second"] != 1 {
		t.Errorf("runs done %v, want the task once with each value", done)
	}
	out := filepath.Join(dir, "out")
	runCLI(t, "run", "-q", "--gpus", "none", "-o", out, "--env", "X=first", tasks)
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, "--env", "X=second", tasks)
	if code != exitUsage || !strings.Contains(stderr, `the environment was ["X=first"], now ["X=second"]`) {
		t.Errorf("same -o, another --env: exit %d, %q", code, stderr)
	}
}

// TestDryRunDefaultOutput: {run_dir} in a dry run without -o names the
// directory the real run would use.
func TestDryRunDefaultOutput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "runs.jsonl", `{"lr": 0.1}`+"\n")
	cmd := nodepackCommand(t, nil, "run", "--gpus", "none", "--dry-run", "--json", "--params", "runs.jsonl", "--", "python", "train.py", "--out={run_dir}")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var doc runsDocument
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	abs, _ := filepath.Abs(filepath.Join(dir, doc.Output))
	if !strings.HasPrefix(doc.Output, "nodepack-runs-") || doc.Runs[0].Argv[2] != "--out="+filepath.Join(abs, "runs", "lr=0.1-"+doc.Runs[0].ID) {
		t.Errorf("output %q, argv %q", doc.Output, doc.Runs[0].Argv)
	}
}

// TestParamsJSONAndRunNames: each run's directory is named after its
// configuration (shared by its reps) and holds its typed params.
func TestParamsJSONAndRunNames(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "runs.jsonl", `{"lr": 0.1, "layers": [64, 32], "amp": true, "name": "a b"}`+"\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, "--reps", "2", "--params", filepath.Join(dir, "runs.jsonl"), "--",
		"bash", "-c", `printf '%s' "$1" > "$NODEPACK_RUN_DIR/got"`, "prog", "{params_json}")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "runs", "*"))
	if len(dirs) != 2 {
		t.Fatalf("run directories %v, want 2", dirs)
	}
	const want = `{"lr":0.1,"layers":[64,32],"amp":true,"name":"a b"}`
	for _, d := range dirs {
		if name := filepath.Base(d); !strings.HasPrefix(name, "lr=0.1,layers=_64,32_,amp=true,name=a_b-") {
			t.Errorf("run directory %s is not named after its configuration", name)
		}
		params, _ := os.ReadFile(filepath.Join(d, "params.json"))
		got, _ := os.ReadFile(filepath.Join(d, "got"))
		if strings.TrimSpace(string(params)) != want || string(got) != want {
			t.Errorf("%s: params.json %s, {params_json} %s; want %s", d, params, got, want)
		}
	}
}

// TestEnvFlag: --env KEY takes nodepack's own value, placeholders fill in
// per run, and two variables in one --env are refused.
func TestEnvFlag(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tasks := writeFile(t, dir, "tasks.txt", `echo "$FROM_ENV $WHERE" > $NODEPACK_RUN_DIR/env`+"\n")
	t.Setenv("FROM_ENV", "inherited,A=1")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, "--env", "FROM_ENV", "--env", "WHERE={run_dir}/x", tasks)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "env"))
	if len(logs) != 1 {
		t.Fatal("no run wrote its env")
	}
	got, _ := os.ReadFile(logs[0])
	if want := "inherited,A=1 " + filepath.Join(filepath.Dir(logs[0]), "x") + "\n"; string(got) != want {
		t.Errorf("run saw %q, want %q", got, want)
	}
	for _, tc := range []struct{ env, want string }{
		{"A=1,B=2", `--env "A=1,B=2": one variable per --env: give --env A=1 --env B=2`},
		{"UNSET_FOR_THIS_TEST", "--env UNSET_FOR_THIS_TEST: UNSET_FOR_THIS_TEST is not set in nodepack's environment"},
	} {
		code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", filepath.Join(dir, "o2"), "--env", tc.env, tasks)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("--env %s: exit %d, %q; want 2 and %q", tc.env, code, stderr, tc.want)
		}
	}
}

// TestMultirunIsDropped: Hydra's --multirun or -m left in a --sweep
// command is dropped with a note, never given to every run; python -m
// stays.
func TestMultirunIsDropped(t *testing.T) {
	code, stdout, stderr := runCLI(t, "run", "--gpus", "none", "--dry-run", "--json", "--sweep", "--", "python", "-m", "pkg.train", "-m", "--multirun", "a=1,2")
	var doc runsDocument
	if code != exitOK || json.Unmarshal([]byte(stdout), &doc) != nil || len(doc.Runs) != 2 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if got := strings.Join(doc.Runs[0].Argv, " "); got != "python -m pkg.train a=1" {
		t.Errorf("argv %q, want python -m pkg.train a=1", got)
	}
	if !strings.Contains(stderr, "dropped -m from the command") || !strings.Contains(stderr, "dropped --multirun from the command") {
		t.Errorf("no note:\n%s", stderr)
	}
}

// TestInputBytes: a byte order mark is no part of the first command;
// invalid UTF-8 in a params file is an input error, not U+FFFD.
func TestInputBytes(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "\xef\xbb\xbftouch "+dir+"/FIRST\r\ntouch "+dir+"/SECOND\r\n")
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", filepath.Join(dir, "out"), tasks); code != exitOK {
		t.Fatalf("BOM task file: exit %d\n%s", code, stderr)
	}
	for _, f := range []string{"FIRST", "SECOND"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	params := writeFile(t, dir, "runs.jsonl", "\xef\xbb\xbf{\"a\": 1}\n{\"a\": \"x\xffy\"}\n")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", filepath.Join(dir, "o2"), "--params", params, "--", "echo")
	if code != exitUsage || !strings.Contains(stderr, params+":2:9: invalid UTF-8") {
		t.Errorf("invalid UTF-8: exit %d, %q", code, stderr)
	}
}

// TestChecksBeforeStart: a missing --wrap program or command, a task line
// bash cannot parse, and an inventory this process cannot run on are
// input errors before anything starts.
func TestChecksBeforeStart(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.txt", "touch "+dir+"/RAN\n")
	badLine := writeFile(t, dir, "bad.txt", "touch "+dir+"/RAN\necho 'unclosed\nfi\n")
	okShell := writeFile(t, dir, "ok.txt", "[[ -n x ]] && echo $((1+2)) | cat; a=(1 2); echo ${a[@]} <<< x\n")
	inv := writeFile(t, dir, "node.json", inventoryWithCPU(t, 4095))
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"missing --wrap program", []string{"--wrap", "no-such-wrapper-x --", good}, `the wrapper: program "no-such-wrapper-x" not found`},
		{"missing command", []string{"--sweep", "--", "no-such-program-x", "a=1,2"}, `the command: program "no-such-program-x" not found`},
		{"unparsable task line", []string{badLine}, "bad.txt:2: bash cannot parse this line: unexpected EOF while looking for matching"},
		{"inventory CPUs not allowed here", []string{"--inventory", inv, good}, "--inventory: CPUs 4095 are not among the CPUs this process may use here"},
	}
	for _, tc := range tests {
		code, _, stderr := runCLI(t, append([]string{"run", "--gpus", "none", "-o", filepath.Join(dir, "out")}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, %q; want 2 and one line with %q", tc.description, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "RAN")); err == nil {
		t.Error("a run started despite the bad input")
	}
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", filepath.Join(dir, "ok"), okShell); code != exitOK {
		t.Errorf("bash that the Go parser accepts: exit %d\n%s", code, stderr)
	}
}

// inventoryWithCPU is a saved node whose one CPU is cpu.
func inventoryWithCPU(t *testing.T, cpu int) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, "detect", "--json", "--gpus", "none")
	if code != exitOK {
		t.Fatalf("detect: %s", stderr)
	}
	var doc map[string]any
	json.Unmarshal([]byte(stdout), &doc)
	doc["cpus"] = []map[string]int{{"id": cpu, "core": 0, "socket": 0, "numa": 0}}
	b, _ := json.Marshal(doc)
	return string(b)
}

// TestWholeCPUsPerRunAdaptsParallel: --cpus-per-run 2 on a node of 2 CPUs
// without GPUs runs one at a time rather than refusing.
func TestWholeCPUsPerRunAdaptsParallel(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "echo $NODEPACK_CPUS >> "+dir+"/DONE\necho $NODEPACK_CPUS >> "+dir+"/DONE\n")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "--cpus", "0,1", "--cpus-per-run", "2", "-o", filepath.Join(dir, "out"), tasks)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if done := doneIn(t, dir); done["0-1"] != 2 {
		t.Errorf("runs saw CPUs %v, want 0-1 twice", done)
	}
}

// TestRestartWhileRunningIsRefused: --restart on a directory another
// nodepack is writing exits 2 naming it, and moves nothing.
func TestRestartWhileRunningIsRefused(t *testing.T) {
	s := newGatedSweep(t, 4)
	p, _ := s.start(t)
	host, _ := os.Hostname()
	code, _, stderr := runCLI(t, s.args("--restart")...)
	if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("another nodepack (pid %d on %s", p.Pid, host)) {
		t.Errorf("--restart while running: exit %d, %q", code, stderr)
	}
	if backups, _ := filepath.Glob(filepath.Join(s.out, "ledger.jsonl.*.bak")); len(backups) != 0 {
		t.Errorf("the live ledger was moved: %v", backups)
	}
	s.open(t)
	p.Signal(syscall.SIGTERM)
	p.wait()
	s.open(t)
	if code, _, stderr := runCLI(t, s.args()...); code != exitOK {
		t.Fatalf("rerun: %d\n%s", code, stderr)
	}
	for id, n := range s.completions(t) {
		if n != 1 {
			t.Errorf("run %s completed %d times", id, n)
		}
	}
}

// TestLedgerDeletedMidSweep: a ledger deleted under a running sweep keeps
// a second nodepack out, is written again with every record, stops new
// starts, and the rerun runs only what is left.
func TestLedgerDeletedMidSweep(t *testing.T) {
	dir := t.TempDir()
	var tasks strings.Builder
	for i := range 5 {
		wait := ""
		if i == 2 || i == 3 { // these two wait for GO, so the ledger can go while they run
			wait = fmt.Sprintf("touch %[1]s/RUNNING.%[2]d; while [ ! -e %[1]s/GO ]; do sleep 0.01; done; ", dir, i)
		}
		fmt.Fprintf(&tasks, "%secho %d >> %s/DONE\n", wait, i, dir)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--gpus", "none", "--parallel", "2", "-o", out, file}
	cmd := nodepackCommand(t, nil, args...)
	var stderr syncBuilder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitForFile(t, filepath.Join(dir, "RUNNING.2"), 30*time.Second)
	waitForFile(t, filepath.Join(dir, "RUNNING.3"), 30*time.Second)
	ledgerPath := filepath.Join(out, "ledger.jsonl")
	if err := os.Remove(ledgerPath); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, args...); code != exitUsage || !strings.Contains(errOut, "is writing it") {
		t.Errorf("a second nodepack after the delete: exit %d, %q", code, errOut)
	}
	writeFile(t, dir, "GO", "") // the two runs end: their records are written
	if err := cmd.Wait(); err == nil {
		t.Errorf("nodepack exited 0 after its ledger was deleted:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "ledger.jsonl was deleted while the sweep ran: it was written again from the open file") {
		t.Errorf("no message:\n%s", stderr.String())
	}
	log, err := ledger.ReadFile(ledgerPath, ledger.ReadOptions{})
	if err != nil || log.Count()[ledger.StateSucceeded] != 4 || log.End == nil {
		t.Fatalf("the ledger after the delete: %v, counts %v, end %v", err, log.Count(), log.End)
	}
	code, _, errOut := runCLI(t, args...)
	if code != exitOK || !strings.Contains(errOut, "skipped 4 runs done before") {
		t.Errorf("rerun: exit %d\n%s", code, errOut)
	}
	if done := doneIn(t, dir); len(done) != 5 {
		t.Errorf("runs done %v, want 5", done)
	}
	for id, n := range doneIn(t, dir) {
		if n != 1 {
			t.Errorf("run %s completed %d times", id, n)
		}
	}
}

// syncBuilder is a strings.Builder safe to read while a process writes it.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFullDiskSaysSo fills a small tmpfs under a sweep: nodepack stops
// starting runs, records why, and status says "disk full" rather than that
// nodepack was killed. It needs root to mount the tmpfs.
func TestFullDiskSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "nodepack-test", dir).Run(); err != nil {
		if os.Getenv("NODEPACK_CI") == "1" {
			t.Fatalf("cannot mount a tmpfs: %v (CI runs as root)", err)
		}
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	var tasks strings.Builder
	for i := range 200 {
		fmt.Fprintf(&tasks, "head -c 100000 /dev/zero > $NODEPACK_RUN_DIR/data # %d\n", i)
	}
	file := writeFile(t, t.TempDir(), "tasks.txt", tasks.String())
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "--parallel", "1", "-o", out, file)
	if code != exitFailed || !strings.Contains(stderr, "disk full") {
		t.Fatalf("exit %d, want 1 and the full disk named:\n%s", code, stderr)
	}
	code, stdout, _ := runCLI(t, "status", out)
	if code != exitOK || !strings.Contains(stdout, "ended: stopped: disk full (no space left on device)") {
		t.Errorf("status:\n%s", stdout)
	}
	doc := statusDocOf(t, out)
	c := doc.Counts
	if doc.Total == nil || c.Pending+c.Running+c.Succeeded+c.Failed+c.Interrupted != *doc.Total {
		t.Errorf("status counts %+v do not add up to %v", c, doc.Total)
	}
}

// TestLogsFillTheDisk: runs whose own stdout fills the disk under the
// output directory (2 MB, 40 runs of 100 KB) are not blamed for it: no run
// is failed, nodepack stops starting runs as for a full ledger, status
// says disk full, and once there is room a plain rerun runs the rest. It
// needs root to mount the tmpfs.
func TestLogsFillTheDisk(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "nodepack-test", dir).Run(); err != nil {
		if os.Getenv("NODEPACK_CI") == "1" {
			t.Fatalf("cannot mount a tmpfs: %v (CI runs as root)", err)
		}
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	file := writeFile(t, t.TempDir(), "tasks.txt", strings.Repeat("head -c 100000 /dev/zero | tr '\\0' x\n", 40))
	out := filepath.Join(dir, "out")
	args := []string{"run", "-q", "--gpus", "none", "-o", out, file}
	code, _, stderr := runCLI(t, args...)
	if code != exitFailed || !strings.Contains(stderr, "disk full") {
		t.Fatalf("exit %d, want 1 and the full disk named:\n%s", code, stderr)
	}
	doc := statusDocOf(t, out)
	if doc.Counts.Failed != 0 || doc.Counts.Succeeded == 40 || len(doc.Shards) != 1 || doc.Shards[0].Note != "stopped: disk full (no space left on device)" {
		t.Errorf("status: counts %+v, shards %+v; want no run failed, stopped: disk full", doc.Counts, doc.Shards)
	}
	if err := exec.Command("mount", "-o", "remount,size=16m", dir).Run(); err != nil {
		t.Fatalf("remount with room: %v", err)
	}
	if code, _, stderr := runCLI(t, args...); code != exitOK {
		t.Fatalf("the rerun with room: exit %d\n%s", code, stderr)
	}
	if doc := statusDocOf(t, out); doc.Counts.Succeeded != 40 {
		t.Errorf("after the rerun: %+v, want all 40 succeeded", doc.Counts)
	}
}

// TestStartRefusedForRoomSaysSo: on a disk with room for the ledger's
// header but not for the room it keeps for the session, nodepack exits 2
// before anything runs, and status says the disk was full, not that
// nodepack was killed. It needs root to mount the tmpfs.
func TestStartRefusedForRoomSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "nodepack-test", dir).Run(); err != nil {
		if os.Getenv("NODEPACK_CI") == "1" {
			t.Fatalf("cannot mount a tmpfs: %v (CI runs as root)", err)
		}
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	file := writeFile(t, t.TempDir(), "tasks.txt", strings.Repeat("true\n", 200))
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, file)
	if code != exitUsage || !strings.Contains(stderr, "disk full") {
		t.Fatalf("exit %d, want 2 and the full disk named:\n%s", code, stderr)
	}
	code, stdout, _ := runCLI(t, "status", out)
	if code != exitOK || !strings.Contains(stdout, "ended: stopped: disk full (no space left on device), 200 runs left") || strings.Contains(stdout, "gone") {
		t.Errorf("status (exit %d):\n%s\nwant the full disk, not a nodepack that was killed", code, stdout)
	}
}

// TestStatusGoneWithoutEndRecord: a sweep whose nodepack died without an
// end record is not said to have been killed, only to have ended without
// one.
func TestStatusGoneWithoutEndRecord(t *testing.T) {
	s := newGatedSweep(t, 5)
	p, _ := s.start(t)
	p.Signal(syscall.SIGKILL)
	p.wait()
	code, stdout, _ := runCLI(t, "status", s.out)
	if code != exitOK || !strings.Contains(stdout, "ended without an end record") || strings.Contains(stdout, "was killed") {
		t.Errorf("status:\n%s", stdout)
	}
}

// TestSIGHUPStopsLikeSIGTERM: a closed terminal (SIGHUP) stops the sweep
// with every end recorded, no process left, exit 129.
func TestSIGHUPStopsLikeSIGTERM(t *testing.T) {
	cmd, stderr, token := startSweep(t, "--grace", "1s")
	out := filepath.Join(filepath.Dir(cmd.Args[len(cmd.Args)-1]), "out")
	cmd.Process.Signal(syscall.SIGHUP)
	if code := exitCode(t, cmd); code != 129 {
		t.Errorf("exit %d, want 129:\n%s", code, stderr)
	}
	if left := processesWith(token); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil || log.End == nil || log.End.Note != "stopped by SIGHUP" || log.Count()[ledger.StateInterrupted] != 2 {
		t.Errorf("ledger: %v, end %+v, counts %v", err, log.End, log.Count())
	}
}

// TestFirstCtrlCSaysWhatHappens: the first SIGINT says at once what it
// did and how to kill now.
func TestFirstCtrlCSaysWhatHappens(t *testing.T) {
	cmd, stderr, _ := startSweep(t, "--grace", "60s")
	cmd.Process.Signal(syscall.SIGINT)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "stopping on SIGINT: 2 runs got SIGTERM (SIGKILL after --grace 1m0s), Ctrl-C again to kill them now") {
		if time.Now().After(deadline) {
			t.Fatalf("no message after the first SIGINT:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, cmd); code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
}

// TestConsoleGoneDoesNotStopTheSweep: nodepack's output piped into head -3
// does not end the sweep: every run runs and the ledger ends.
func TestConsoleGoneDoesNotStopTheSweep(t *testing.T) {
	dir := t.TempDir()
	var tasks strings.Builder
	for i := range 200 {
		fmt.Fprintf(&tasks, "echo %d >> %s/DONE\n", i, dir)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	exe, _ := os.Executable()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", fmt.Sprintf("%s run --gpus none --parallel 2 --live -o %s/out %s 2>&1 | head -3", exe, dir, file))
	cmd.Env = append(os.Environ(), "NODEPACK_TEST_AS_MAIN=1")
	cmd.Run()
	if done := doneIn(t, dir); len(done) != 200 {
		t.Errorf("%d runs done, want 200", len(done))
	}
	log, err := ledger.ReadFile(filepath.Join(dir, "out", "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil || log.End == nil || log.End.Note != "done" {
		t.Errorf("ledger: %v, end %+v", err, log.End)
	}
}

// TestConsoleNeverReadDoesNotBlock: with stdout (--live) and stderr pipes
// nobody reads, the sweep goes on, and SIGTERM still stops it at once.
func TestConsoleNeverReadDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	var tasks strings.Builder
	for i := range 40 {
		fmt.Fprintf(&tasks, "head -c 300000 /dev/zero | tr '\\0' x | fold -w 100; echo %d >> %s/DONE\n", i, dir)
	}
	tasks.WriteString("touch " + dir + "/LAST; sleep 300\n")
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	cmd := nodepackCommand(t, nil, "run", "--gpus", "none", "--parallel", "1", "--live", "--grace", "1s", "-o", filepath.Join(dir, "out"), file)
	stdoutR, stdoutW, _ := os.Pipe()
	stderrR, stderrW, _ := os.Pipe()
	defer stdoutR.Close()
	defer stderrR.Close()
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdoutW.Close()
	stderrW.Close()
	waitForFile(t, filepath.Join(dir, "LAST"), time.Minute)
	if done := doneIn(t, dir); len(done) != 40 {
		t.Errorf("%d runs done before the last, want 40", len(done))
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("nodepack did not stop on SIGTERM with its output blocked")
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("exit %d after %v, want 143", code, time.Since(start))
	}
}

// waitForFile waits for path to appear.
func waitForFile(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStopBeforeInsideTheWindowStartsNothing: a job already inside its
// stop window starts nothing and exits 3, every time.
func TestStopBeforeInsideTheWindowStartsNothing(t *testing.T) {
	fakeCommands(t, map[string]string{"squeue": "exit 1", "scontrol": "exit 1"}) // no Slurm to ask
	t.Setenv("SLURM_JOB_ID", "4242")
	t.Setenv("SLURM_JOB_END_TIME", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	dir := t.TempDir()
	var tasks strings.Builder
	for i := range 8 {
		fmt.Fprintf(&tasks, "echo %d >> %s/DONE\n", i, dir)
	}
	file := writeFile(t, dir, "tasks.txt", tasks.String())
	trials := 100
	if testing.Short() {
		trials = 10
	}
	for trial := range trials {
		out := filepath.Join(dir, "out"+strconv.Itoa(trial))
		code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "--parallel", "4", "-o", out, "--stop-before", "2h", file)
		if code != exitDeferred || !strings.Contains(stderr, "8 runs deferred") {
			t.Fatalf("trial %d: exit %d\n%s", trial, code, stderr)
		}
	}
	if done := doneIn(t, dir); len(done) != 0 {
		t.Errorf("runs started inside the stop window: %v", done)
	}
}

// TestStatusWatchTakesAValue: the help's own example, --watch 10s DIR.
func TestStatusWatchTakesAValue(t *testing.T) {
	s := newGatedSweep(t, 2)
	s.open(t)
	if code, _, stderr := runCLI(t, s.args()...); code != exitOK {
		t.Fatal(stderr)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w := &firstWrite{written: make(chan struct{}), cancel: cancel}
	code := program(ctx, []string{"status", "--watch", "10s", s.out}, w, io.Discard)
	if code != exitOK || !strings.Contains(w.String(), "2 runs: 2 succeeded") {
		t.Errorf("status --watch 10s DIR: exit %d\n%s", code, w.String())
	}
	if got := watchValue([]string{"--watch", "10s"}); !slices.Equal(got, []string{"--watch", "10s"}) {
		t.Errorf("a directory named 10s: %q", got)
	}
}

// firstWrite collects output and cancels once something was written.
type firstWrite struct {
	bytes.Buffer
	written chan struct{}
	cancel  func()
}

func (f *firstWrite) Write(p []byte) (int, error) {
	n, err := f.Buffer.Write(p)
	f.cancel()
	return n, err
}

// TestResumedProgressEndsAtTotal: a resumed sweep's counter counts the
// runs it skips, so it ends at N/N; --live lines say where a run comes from.
func TestResumedProgressEndsAtTotal(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "echo one\necho two\n")
	out := filepath.Join(dir, "out")
	runCLI(t, "run", "--gpus", "none", "-o", out, tasks)
	writeFile(t, dir, "tasks.txt", "echo one\necho two\necho three\n")
	code, stdout, stderr := runCLI(t, "run", "--gpus", "none", "--live", "-o", out, tasks)
	if code != exitOK || !strings.Contains(stderr, "[3/3] ok") || !strings.Contains(stderr, "1 run: 1 succeeded") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if first, _, _ := strings.Cut(stderr, "\n"); first != "nodepack: output "+out+" (nodepack status "+out+")" {
		t.Errorf("first line %q, want the output directory", first)
	}
	if !strings.Contains(stdout, "["+tasks+":3] three") {
		t.Errorf("--live output %q, want the line prefixed with its origin", stdout)
	}
	if code, stdout, _ := runCLI(t, "--version"); code != exitOK || !strings.HasPrefix(stdout, "nodepack ") {
		t.Errorf("--version: %d %q", code, stdout)
	}
}

// TestLedgerHeaderIsSnakeCase: the plan in the ledger's header uses the
// same snake_case names as plan --json.
func TestLedgerHeaderIsSnakeCase(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true\n")
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks); code != exitOK {
		t.Fatal(stderr)
	}
	b, _ := os.ReadFile(filepath.Join(out, "ledger.jsonl"))
	header, _, _ := strings.Cut(string(b), "\n")
	var h struct {
		Plan  map[string]json.RawMessage `json:"plan"`
		Sweep map[string]json.RawMessage `json:"sweep"`
	}
	if err := json.Unmarshal([]byte(header), &h); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"schema", "request", "slots", "idle"} {
		if _, ok := h.Plan[key]; !ok {
			t.Errorf("header plan lacks %q: %s", key, header)
		}
	}
	if _, ok := h.Plan["Slots"]; ok {
		t.Errorf("header plan has Go field names: %s", header)
	}
	if _, ok := h.Sweep["kind"]; !ok {
		t.Errorf("header has no sweep definition: %s", header)
	}
}

// TestGitignoreCoversOutputs: output directories made in the repository
// (running the examples) are not committed by accident.
func TestGitignoreCoversOutputs(t *testing.T) {
	b, err := os.ReadFile("../../.gitignore")
	if err != nil || !slices.Contains(strings.Fields(string(b)), "nodepack-*/") {
		t.Errorf(".gitignore lacks nodepack-*/: %v", err)
	}
}

// derefOr returns *p, or fallback when p is nil.
func derefOr(p *int, fallback int) int {
	if p == nil {
		return fallback
	}
	return *p
}
