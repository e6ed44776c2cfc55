package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
)

// TestFailuresExplainThemselves: a sweep with mixed failures names each
// one's class everywhere — the summary, the ledger, status and status
// --json — retries per class, and says what to do next.
func TestFailuresExplainThemselves(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", strings.Join([]string{
		`echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB' >&2; exit 1`,
		`true`,
		`trian.py --lr 0.1`,
		`echo saving > /dev/full`,
		`echo 'my allocator: arena exhausted' >&2; exit 1`,
		`echo 'ValueError: bad lr' >&2; exit 2`,
	}, "\n")+"\n")
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, "run", "-j", "2", "-o", out, "--retry", "cuda-oom=1", "--retry-backoff", "10ms",
		"--fail-pattern", "cuda-oom=arena exhausted", tasks)
	if code != exitFailed {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	all := stdout + stderr
	for _, want := range []string{
		"5 failed (2 cuda-oom, 1 disk-full, 1 not-found, 1 exit)",
		"cuda-oom, will retry",
		"| bash: line 1: trian.py: command not found",
		"2 runs ran out of GPU memory",
		"1 run could not start their program",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}

	// The ledger: every failed attempt has a class and its stderr's last lines.
	f, err := os.Open(filepath.Join(out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	attempts := map[failure.Class]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r ledger.Finished
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != ledger.TypeFinished {
			continue
		}
		if (r.Class == "") != (r.Reason == "ok") || r.Class != "" && len(r.StderrTail) == 0 {
			t.Errorf("record %s: reason %s, class %q, tail %q", r.ID, r.Reason, r.Class, r.StderrTail)
		}
		attempts[r.Class]++
	}
	if attempts[failure.CUDAOOM] != 4 || attempts[failure.Exit] != 1 {
		t.Errorf("attempts by class %v: want 4 cuda-oom (2 runs, one retry each)", attempts)
	}

	// Runs failed: status exits 1, as run did.
	code, stdout, _ = runCLI(t, "status", "--failed", out)
	if code != exitFailed || !strings.Contains(stdout, "5 runs failed: 2 cuda-oom, 1 disk-full, 1 not-found, 1 exit") ||
		!strings.Contains(stdout, "disk-full (exit 1)  1 attempt") || !strings.Contains(stdout, "| ValueError: bad lr") ||
		strings.Contains(stdout, "succeeded") {
		t.Errorf("status --failed (exit %d):\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "status", "--json", out)
	var doc results.Status
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != exitFailed {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	sum := 0
	for _, n := range doc.Classes {
		sum += n
	}
	if sum != doc.Counts.Failed || doc.Classes[failure.CUDAOOM] != 2 {
		t.Errorf("classes %v do not add up to %d failed", doc.Classes, doc.Counts.Failed)
	}
}

func TestFailureFlagsAreChecked(t *testing.T) {
	tasks := writeFile(t, t.TempDir(), "tasks.txt", "true\n")
	for _, tc := range []struct{ flag, value, want string }{
		{"--retry", "oom=1", `unknown failure class "oom"`},
		{"--retry", "cuda-oom=-1", "N must be a count"},
		{"--retry", "interrupted=1", "interrupted runs are not retried"},
		{"--fail-pattern", "exit=boom", "exit is not read from a log"},
		{"--fail-pattern", "cuda-oom=(", "missing closing )"},
		{"--retry-backoff", "-1s", "must not be negative"},
		{"--checkpoint-signal", "KILL", "want a signal a run can catch"},
		{"--checkpoint-signal", "NOPE", "want a signal a run can catch"},
		{"--density-window", "0s", "--density-window 0s: must be more than 0"},
		{"--runs-per-gpu", "many", "want a whole number of runs, or auto"},
	} {
		code, _, stderr := runCLI(t, "run", "--dry-run", tc.flag, tc.value, tasks)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%s %s: exit %d, %q; want exit 2 saying %q", tc.flag, tc.value, code, stderr, tc.want)
		}
	}
}

// TestHostOOMThroughTheCLI: nodepack in a memory cgroup of 384 MiB, as in
// a batch job with a memory limit, finds the cgroup's OOM kill count itself
// and names a run the kernel killed host-oom. The limit leaves room for a
// race-enabled nodepack; the run grows until the kernel kills it.
func TestHostOOMThroughTheCLI(t *testing.T) {
	cg, err := os.MkdirTemp("/sys/fs/cgroup/memory", "nodepack-cli-test-")
	if err != nil {
		t.Skipf("no writable cgroup v1 memory hierarchy: %v", err)
	}
	t.Cleanup(func() {
		// The supervisor leaves the group a moment after nodepack.
		for range 100 {
			if os.Remove(cg) == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cgroup %s still busy", cg)
	})
	if err := os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte("402653184"), 0o644); err != nil {
		t.Skip(err)
	}
	os.WriteFile(filepath.Join(cg, "memory.swappiness"), []byte("0"), 0o644)
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "tail -n 1 < <(head -c 4000000000 /dev/zero)\ntrue\n")
	out := filepath.Join(dir, "out")
	cmd := nodepackCommand(t, []string{"bash", "-c", `echo $$ > ` + cg + `/cgroup.procs && exec "$@"`, "bash"}, "run", "-j", "1", "-o", out, tasks)
	b, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitFailed {
		t.Fatalf("exit %d (%v)\n%s", code, err, b)
	}
	if !strings.Contains(string(b), "1 failed (1 host-oom)") || !strings.Contains(string(b), "killed by the kernel's OOM killer") {
		t.Errorf("output:\n%s", b)
	}
}

// TestEnforceMemThroughTheCLI: with --enforce-mem, a run over the mem it
// asked for is host-oom and its log's last line says so, whether this
// machine lets nodepack make memory cgroups (the kernel kills it) or not
// (nodepack's sampler does); the first lines say which holds.
func TestEnforceMemThroughTheCLI(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true\n#nodepack mem=48MiB\ntail -n 1 < <(head -c 300000000 /dev/zero; sleep 30)\necho small\n")
	code, _, stderr := runCLI(t, "run", "--enforce-mem", "-o", filepath.Join(dir, "out"), tasks)
	if code != exitFailed || !strings.Contains(stderr, "3 runs: 2 succeeded, 1 failed (1 host-oom)") ||
		!strings.Contains(stderr, "nodepack: --enforce-mem: ") || !strings.Contains(stderr, "it asked for ---") ||
		!strings.Contains(stderr, "runs ask for no mem unless their lines say mem=") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
	// No cgroup and no sampler: nothing could hold the runs.
	if _, err := resources.RunMemoryCgroups(); err != nil {
		code, _, stderr := runCLI(t, "run", "--enforce-mem", "--sample-interval", "0", "-o", filepath.Join(dir, "out2"), tasks)
		if code != exitUsage || !strings.Contains(stderr, "--sample-interval 0 turns off the sampler") {
			t.Errorf("--sample-interval 0 without cgroups: exit %d:\n%s", code, stderr)
		}
	}
}

// TestRetryCommand: nodepack retry reruns only the failed runs of the
// chosen class, with the recorded command, from the directory it ran in;
// the other failed runs stay failed, and status still adds up.
func TestRetryCommand(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "tasks.txt", strings.Join([]string{
		`true`,
		`test -e oom-once || { touch oom-once; echo 'RuntimeError: CUDA error: out of memory' >&2; exit 1; }`,
		`test -e oom-twice || { touch oom-twice; echo 'torch.OutOfMemoryError: CUDA out of memory.' >&2; exit 1; }`,
		`echo 'ValueError: bad lr' >&2; exit 2`,
		`test -e enospc-once || { touch enospc-once; echo x > /dev/full; }`,
	}, "\n")+"\n")
	// The sweep runs in dir with a relative task file and output, as a user
	// types it; retry runs from elsewhere.
	cmd := nodepackCommand(t, nil, "run", "-q", "-j", "2", "-o", "out", "tasks.txt")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != exitFailed {
		t.Fatalf("first run: %v\n%s", err, b)
	}
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "retry", "--class", "cuda-oom", out)
	if code != exitFailed || !strings.Contains(stderr, "2 failed runs of 4 failed runs, in "+dir) {
		t.Fatalf("retry: exit %d\n%s", code, stderr)
	}
	status := func() results.Status {
		t.Helper()
		_, stdout, _ := runCLI(t, "status", "--json", out)
		var doc results.Status
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	doc := status()
	if doc.Counts.Succeeded != 3 || doc.Counts.Failed != 2 || doc.Classes[failure.Exit] != 1 || doc.Classes[failure.DiskFull] != 1 || doc.Classes[failure.CUDAOOM] != 0 {
		t.Errorf("after retry --class cuda-oom: %+v %v", doc.Counts, doc.Classes)
	}
	// A run by ID; then nothing of the class is left to retry.
	var enospc string
	for _, r := range doc.Failures {
		if r.Class == string(failure.DiskFull) {
			enospc = r.ID
		}
	}
	if code, _, stderr = runCLI(t, "retry", "--run", enospc, out); code != exitFailed || !strings.Contains(stderr, "1 failed run of 2") {
		t.Errorf("retry --run: exit %d\n%s", code, stderr)
	}
	if doc = status(); doc.Counts.Succeeded != 4 || doc.Counts.Failed != 1 || *doc.Total != 5 {
		t.Errorf("after retry --run: %+v", doc.Counts)
	}
	code, _, stderr = runCLI(t, "retry", "--class", "cuda-oom", out)
	if code != exitOK || !strings.Contains(stderr, "no failed runs to retry") || !strings.Contains(stderr, "(failed: 1 exit)") {
		t.Errorf("nothing to retry: exit %d\n%s", code, stderr)
	}
	sharded := filepath.Join(dir, "sharded")
	plain := writeFile(t, dir, "plain.txt", "true\ntrue\n")
	if code, _, stderr := runCLI(t, "run", "-q", "--shard", "0/2", "-o", sharded, plain); code != exitOK {
		t.Fatalf("sharded run: %d %s", code, stderr)
	} else if !strings.Contains(stderr, "shard 0/2: runs 0, 2, 4, …") || strings.Contains(stderr, "from shard") {
		t.Errorf("a given shard is noted as it was given, not from itself:\n%s", stderr)
	}
	if code, _, stderr := runCLI(t, "retry", sharded); code != exitUsage || !strings.Contains(stderr, "sharded 2 ways") {
		t.Errorf("retry of a sharded sweep: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{{"retry", "--run", "nope", out}, {"retry", "--class", "oom", out}, {"retry", filepath.Join(dir, "missing")}, {"retry"}} {
		if code, _, stderr := runCLI(t, args...); code != exitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, %q", args, code, stderr)
		}
	}
}

func TestRetryArgs(t *testing.T) {
	extra := []string{"--retry-failed", "-o", "/abs/out"}
	for _, tc := range []struct{ desc, recorded, want string }{
		{"a task file", "-j 2 -o out tasks.txt", "-j 2 tasks.txt --retry-failed -o /abs/out"},
		{"a sweep's command stays last", "--sweep -o=out -- python train.py lr=1,2", "--sweep --retry-failed -o /abs/out -- python train.py lr=1,2"},
		{"an earlier retry's choices go", "tasks.txt --retry-failed -o /abs/out --retry-class cuda-oom --retry-run=abc --restart", "tasks.txt --retry-failed -o /abs/out"},
		{"the command's own -o stays", "--params p.jsonl -- prog -o x --restart", "--params p.jsonl --retry-failed -o /abs/out -- prog -o x --restart"},
	} {
		if got := strings.Join(retryArgs(strings.Fields(tc.recorded), extra), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// TestStatusShowsGPUsOut: a gpu_out record (a GPU taken out of use after a
// fault) shows in status, status --failed and status --json.
func TestStatusShowsGPUsOut(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true\n")
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "run", "-q", "-o", out, tasks); code != exitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	path := filepath.Join(out, "ledger.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, rest, _ := strings.Cut(string(b), "\n")
	gpuOut := `{"type":"gpu_out","time":"2026-11-24T10:00:00Z","gpus":["GPU-b"],"note":"Xid 79"}`
	if err := os.WriteFile(path, []byte(header+"\n"+gpuOut+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status", out}, {"status", "--failed", out}} {
		if code, stdout, _ := runCLI(t, args...); code != exitOK || !strings.Contains(stdout, "GPU out of use: GPU-b after Xid 79") {
			t.Errorf("%q: exit %d\n%s", args, code, stdout)
		}
	}
	_, stdout, _ := runCLI(t, "status", "--json", out)
	var doc results.Status
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.GPUsOut) != 1 || doc.GPUsOut[0].UUID != "GPU-b" {
		t.Errorf("status --json: %v %+v", err, doc.GPUsOut)
	}
}

// TestShellWord: what nodepack prints as a command pastes into a shell as
// it is, also for a directory with spaces or quotes.
func TestShellWord(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"out/sweep-1", "out/sweep-1"},
		{"/scratch/u@x/run=3,lr=0.1", "/scratch/u@x/run=3,lr=0.1"},
		{"my runs", "'my runs'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"", "''"},
		{"out\x1b]0;PWNED\x07", `$'out\x1b]0;PWNED\x07'`},
		{"a\nb's\\", `$'a\x0ab\'s\\'`},
		{"caf\xe9", `$'caf\xe9'`},
	} {
		if got := shellWord(tc.in); got != tc.want {
			t.Errorf("shellWord(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if out, err := exec.Command("bash", "-c", "printf %s "+shellWord(tc.in)).Output(); err != nil || string(out) != tc.in {
			t.Errorf("bash read %s as %q (%v), want %q", shellWord(tc.in), out, err, tc.in)
		}
	}
	steps := strings.Join(nextSteps(map[failure.Class]int{failure.CUDAOOM: 2}, "my runs"), "\n")
	if !strings.Contains(steps, "nodepack retry --class cuda-oom 'my runs'") {
		t.Errorf("next steps: %s", steps)
	}
}

// TestStatusAllSucceeded: a sweep whose every run succeeded lists no
// failure, in the text and in the JSON (an empty choice of runs to read
// once meant every run, and every run was listed as failed).
func TestStatusAllSucceeded(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(tasks, []byte("true\ntrue 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "run", "-q", "-o", out, tasks); code != exitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	code, text, _ := runCLI(t, "status", out)
	if code != exitOK || !strings.Contains(text, "2 succeeded, 0 failed") || strings.Contains(text, "failed:") || strings.Contains(text, "exit ?") {
		t.Errorf("status: exit %d\n%s", code, text)
	}
	_, doc, _ := runCLI(t, "status", "--json", out)
	var st struct {
		Failures []json.RawMessage `json:"failures"`
	}
	if err := json.Unmarshal([]byte(doc), &st); err != nil || len(st.Failures) != 0 {
		t.Errorf("status --json: %v, failures %s", err, st.Failures)
	}
	if code, text, _ := runCLI(t, "status", "--failed", out); code != exitOK || !strings.Contains(text, "no failed runs") {
		t.Errorf("status --failed: exit %d\n%s", code, text)
	}
}
