package execute

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// TestFailureClasses: real processes that fail in every way a CPU-only
// machine can show; each attempt gets its class and its stderr's last
// lines. The framework messages are the ones runner/failure's tests name
// the sources of.
func TestFailureClasses(t *testing.T) {
	cases := []struct {
		line string
		want failure.Class
	}{
		{`echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.15 GiB' >&2; exit 1`, failure.CUDAOOM},
		{`echo 'tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[16384,16384]' >&2; exit 1`, failure.CUDAOOM},
		{`echo 'jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 68719476736 bytes.' >&2; exit 1`, failure.CUDAOOM},
		{`echo 'RuntimeError: CUDA error: an illegal memory access was encountered' >&2; exit 1`, failure.GPUError},
		{`echo 'my-oom: arena exhausted' >&2; exit 1`, failure.CUDAOOM}, // the user's pattern
		{`echo checkpoint > /dev/full`, failure.DiskFull},               // a real ENOSPC, as bash reports it
		{`trian.py --lr 0.1`, failure.NotFound},
		{`kill -SEGV $$`, failure.Signal},
		{`echo 'ModuleNotFoundError: No module named tourch' >&2; exit 3`, failure.Exit},
		{`sleep 30`, failure.Timeout},
	}
	var lines []string
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	user, err := failure.ParsePattern(`cuda-oom=arena exhausted`)
	if err != nil {
		t.Fatal(err)
	}
	// The timeout stops only the sleep; every other run ends well within it,
	// also on a loaded machine.
	sum, events, err := execute(t, t.Context(), lanes(4), Options{Process: Process{Timeout: 2 * time.Second, FailPatterns: []failure.Pattern{user}}}, shell(lines...)...)
	if err != nil || len(events) != len(cases) {
		t.Fatalf("%v, %d events", err, len(events))
	}
	byID := map[string]run.Event{}
	for _, ev := range events {
		byID[ev.Run.ID] = ev
	}
	want := map[failure.Class]int{}
	for i, run := range shell(lines...) {
		ev := byID[run.ID]
		want[cases[i].want]++
		if ev.Class != cases[i].want {
			t.Errorf("%q: class %q (exit %d %s), want %q", cases[i].line, ev.Class, ev.ExitCode, ev.Signal, cases[i].want)
		}
	}
	if ev := byID[shell(lines...)[8].ID]; strings.Join(ev.StderrTail, "|") != "ModuleNotFoundError: No module named tourch" {
		t.Errorf("stderr tail %q", ev.StderrTail)
	}
	for c, n := range want {
		if sum.Classes[c] != n {
			t.Errorf("summary counts %d runs of %s, want %d (%v)", sum.Classes[c], c, n, sum.Classes)
		}
	}
}

// TestMissingWrapIsNotFound: a --wrap prefix that does not exist fails
// every run as not-found, without a retry (Retries does not cover it).
func TestMissingWrapIsNotFound(t *testing.T) {
	_, events, err := execute(t, t.Context(), lanes(1), Options{Policy: Policy{Retries: 3}, Process: Process{Wrap: []string{"/nonexistent/apptainer", "exec"}}}, shell("true")...)
	if err != nil || len(events) != 1 {
		t.Fatalf("%v, %d events", err, len(events))
	}
	if ev := events[0]; ev.Class != failure.NotFound || ev.Retry || ev.Attempt != 1 {
		t.Errorf("class %q, retry %v, attempt %d; want not-found, not retried", ev.Class, ev.Retry, ev.Attempt)
	}
}

// TestRetryBudgetPerClass: each class has its own budget, Retries covers
// the classes Retry does not name (but not not-found and host-oom), and a
// run that recovers stops retrying.
func TestRetryBudgetPerClass(t *testing.T) {
	oom := `echo 'RuntimeError: CUDA error: out of memory' >&2; `
	runs := shell(
		oom+`exit 1`, // always cuda-oom: 1 + 2 attempts
		`exit 4`,     // exit: its budget is 0 although Retries is 5
		`trian.py`,   // not-found: not covered by Retries
		oom+`test "$NODEPACK_ATTEMPT" -ge 2 || exit 1`, // recovers on its second attempt
		`kill -USR1 $$`, // signal: Retries covers it, 1 + 5 attempts
	)
	opts := Options{Policy: Policy{Retries: 5, Retry: map[failure.Class]int{failure.CUDAOOM: 2, failure.Exit: 0}}}
	sum, events, err := execute(t, t.Context(), lanes(2), opts, runs...)
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]int{}
	for _, ev := range events {
		attempts[ev.Run.ID]++
	}
	for i, want := range []int{3, 1, 1, 2, 6} {
		if got := attempts[runs[i].ID]; got != want {
			t.Errorf("run %d (%s): %d attempts, want %d", i, runs[i].Args[2], got, want)
		}
	}
	if sum.Succeeded != 1 || sum.Failed != 4 || sum.Classes[failure.CUDAOOM] != 1 || sum.Classes[failure.Signal] != 1 {
		t.Errorf("summary %+v", sum)
	}
	// Each attempt's tail is its own: the log's earlier attempts and the
	// header between them are not in it.
	for _, ev := range events {
		if ev.Run.ID == runs[0].ID && strings.Join(ev.StderrTail, "|") != "RuntimeError: CUDA error: out of memory" {
			t.Errorf("attempt %d's tail %q", ev.Attempt, ev.StderrTail)
		}
	}
}

// TestRetryBackoffDoubles: the retries of a run wait RetryBackoff, then
// twice that, and the run keeps its lane meanwhile.
func TestRetryBackoffDoubles(t *testing.T) {
	const backoff = 150 * time.Millisecond
	_, events, err := execute(t, t.Context(), lanes(1), Options{Policy: Policy{Retries: 2, RetryBackoff: backoff}}, shell("exit 1")...)
	if err != nil || len(events) != 3 {
		t.Fatalf("%v, %d events", err, len(events))
	}
	for i := 1; i < len(events); i++ {
		gap := events[i].Start.Sub(events[i-1].End)
		if want := backoff << (i - 1); gap < want {
			t.Errorf("retry %d started %v after the attempt before ended, want at least %v", i, gap, want)
		}
		if events[i].Lane != events[0].Lane {
			t.Errorf("retry %d in lane %d, not %d", i, events[i].Lane, events[0].Lane)
		}
	}
}

// TestHostOOM: a run the kernel's OOM killer kills, in a memory cgroup
// with a small limit, is host-oom; the same run without the OOM count is a
// plain signal. Needs a writable cgroup v1 memory hierarchy or a cgroup v2
// tree with the memory controller (root in CI).
func TestHostOOM(t *testing.T) {
	dir, events := memoryCgroup(t, 64<<20)
	// The run joins the limited cgroup, then holds 300 MB: tail keeps the
	// last line, and /dev/zero has none. One run is killed itself, the
	// other's child is (bash then exits 137).
	join := `echo $$ > ` + filepath.Join(dir, "cgroup.procs") + ` && `
	lines := []string{
		join + `exec tail -n 1 < <(head -c 300000000 /dev/zero)`,
		join + `head -c 300000000 /dev/zero | tail -n 1; exit $?`,
	}
	count := func() (uint64, bool) { return oomKillCount(events) }
	_, evs, err := execute(t, t.Context(), lanes(1), Options{Hooks: Hooks{OOMKills: count}}, shell(lines...)...)
	if err != nil || len(evs) != len(lines) {
		t.Fatalf("%v, %d events", err, len(evs))
	}
	for _, ev := range evs {
		if ev.Class != failure.HostOOM {
			t.Errorf("%s: class %q (exit %d %s), want host-oom; oom count now %v", ev.Run.Args[2], ev.Class, ev.ExitCode, ev.Signal, must(count()))
		}
	}
	// Retried (only when asked), with half as much memory again when the
	// run asked for some.
	retried := run.Run{ID: "retried", Args: []string{"bash", "-c", `test "$NODEPACK_ATTEMPT" -ge 2 && exit 0; ` + lines[0]}, Request: request("mem=1GiB cpus=0")}
	topo := pack.Topology{CPUs: allowedCPUs(t), Memory: 8 << 30}
	_, evs, err = execute(t, t.Context(), func(o *Options) { o.Topology = topo }, Options{Policy: Policy{Retry: map[failure.Class]int{failure.HostOOM: 1}}, Hooks: Hooks{OOMKills: count}}, retried)
	if err != nil || len(evs) != 2 || evs[0].Class != failure.HostOOM || evs[1].Reason != run.OK || evs[1].Place.Request.Mem != 3<<29 {
		t.Errorf("retry with more memory: %v, %d events", err, len(evs))
		for _, ev := range evs {
			t.Logf("attempt %d: %s %s, request %v", ev.Attempt, ev.Reason, ev.Class, ev.Place.Request)
		}
	}
	// Without the count the same death is a signal: nothing else tells
	// the OOM killer from a kill -9.
	_, evs, err = execute(t, t.Context(), lanes(1), Options{}, shell(lines[0])...)
	if err != nil || len(evs) != 1 || evs[0].Class != failure.Signal {
		t.Errorf("without the count: %v, %+v", err, evs)
	}
}

func must(n uint64, ok bool) string {
	if !ok {
		return "unreadable"
	}
	return strconv.FormatUint(n, 10)
}

// memoryCgroup makes a memory cgroup limited to limit bytes, removed at the
// end of the test, and returns its directory and the file that counts its
// OOM kills; it skips the test where none can be made.
func memoryCgroup(t *testing.T, limit int) (dir, events string) {
	t.Helper()
	for _, c := range []struct{ parent, limitFile, eventsFile string }{
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.oom_control"},
		{"/sys/fs/cgroup", "memory.max", "memory.events"},
	} {
		if _, err := os.Stat(filepath.Join(c.parent, c.limitFile)); err != nil && c.limitFile == "memory.limit_in_bytes" {
			continue
		}
		var err error
		if dir, err = os.MkdirTemp(c.parent, "nodepack-test-"); err != nil {
			continue
		}
		t.Cleanup(func() {
			for range 50 {
				if os.Remove(dir) == nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // the killed run's processes leave the group as they are reaped
			}
		})
		if os.WriteFile(filepath.Join(dir, c.limitFile), []byte(strconv.Itoa(limit)), 0o644) != nil {
			continue
		}
		// No swap to page out to: the limit is the limit.
		os.WriteFile(filepath.Join(dir, "memory.swappiness"), []byte("0"), 0o644)
		os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644)
		return dir, filepath.Join(dir, c.eventsFile)
	}
	t.Skip("no writable memory cgroup here (needs root and cgroup v1 memory or v2 with the memory controller)")
	return "", ""
}

// oomKillCount reads the oom_kill line of memory.events or
// memory.oom_control.
func oomKillCount(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return usage.ParseOOMKill(b)
}

// TestCUDAOOMRetryAsksForMore: a run that runs out of GPU memory is
// retried with half as much memory again while that fits beside the
// headroom (38 of 40 GiB), then with a GPU of its own,
// placed anew each time (here on four fake 40 GiB GPUs, beside runs that
// share them), with its attempts counted across the placements.
func TestCUDAOOMRetryAsksForMore(t *testing.T) {
	topo := fourGPUs(t)
	oom := run.Run{ID: "oom", Args: []string{"bash", "-c", `test "$NODEPACK_ATTEMPT" -ge 4 || { echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB' >&2; exit 1; }`},
		Request: request("gpu_mem=16GiB cpus=0")}
	runs := []run.Run{oom}
	for i := range 6 {
		runs = append(runs, run.Run{ID: "share" + strconv.Itoa(i), Args: []string{"sleep", "0.2"}, Request: request("gpu_mem=16GiB cpus=0")})
	}
	_, events, err := execute(t, t.Context(), func(o *Options) { o.Topology = topo }, Options{Policy: Policy{Retry: map[failure.Class]int{failure.CUDAOOM: 3}}}, runs...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		if ev.Run.ID != "oom" {
			continue
		}
		got = append(got, fmt.Sprintf("%d:%s:%s", ev.Attempt, ev.Place.Request, ev.Reason))
		if ev.Attempt < 4 && (ev.Class != failure.CUDAOOM || !ev.Retry) {
			t.Errorf("attempt %d: class %s, retry %v", ev.Attempt, ev.Class, ev.Retry)
		}
	}
	want := "1:gpu_mem=16GiB cpus=0:failed 2:gpu_mem=24GiB cpus=0:failed 3:gpu_mem=36GiB cpus=0:failed 4:gpus=1 cpus=0:ok"
	if strings.Join(got, " ") != want {
		t.Errorf("attempts %q, want %q", strings.Join(got, " "), want)
	}
}

// TestGPUFaultTakesTheGPUOut: a GPU that reports a fault (as NVML's Xid
// events would) is taken out of use: the run on it, which then fails, is
// gpu-error and runs again on another GPU without a retry budget, and no
// run starts on it again.
func TestGPUFaultTakesTheGPUOut(t *testing.T) {
	dir := t.TempDir()
	release, faulted := filepath.Join(dir, "release"), filepath.Join(dir, "faulted")
	// A run fails while its GPU is the faulted one, as a CUDA program does.
	line := waitFor(release) + `; test "$CUDA_VISIBLE_DEVICES" != "$(cat ` + faulted + ` 2>/dev/null)" || { echo 'CUDA error: unspecified launch failure' >&2; exit 1; }`
	var runs []run.Run
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		runs = append(runs, run.Run{ID: id, Args: []string{"bash", "-c", line}, Request: request("gpus=1 cpus=0")})
	}
	faults := make(chan usage.GPUFault, 1)
	out := make(chan struct{}) // closed once the GPU is out
	var mu sync.Mutex
	started := 0
	var victim string // the GPU of run c
	opts := Options{
		Hooks: Hooks{
			GPUFaults: faults,
			OnGPUFault: func(f usage.GPUFault, none bool) {
				close(out) // a second call would panic: once per GPU
				if none {
					t.Error("no GPU left after one fault")
				}
			},
			OnEvent: func(ev run.Event) {
				if ev.Kind != run.Started || ev.Attempt != 1 {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if ev.Run.ID == "c" {
					victim = ev.Place.GPUs[0].UUID
				}
				if started++; started == 4 { // every GPU busy: c's GPU fails
					os.WriteFile(faulted, []byte(victim), 0o644)
					faults <- usage.GPUFault{UUID: victim, Reason: "Xid 79", Time: time.Now()}
					go func() {
						<-out // once it is out, let the runs end
						os.WriteFile(release, nil, 0o644)
					}()
				}
			},
		},
	}
	sum, events, err := execute(t, t.Context(), func(o *Options) { o.Topology, o.Parallel = fourGPUs(t), 4 }, opts, runs...)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Succeeded != 6 || len(sum.GPUsOut) != 1 || sum.GPUsOut[0].UUID != victim || sum.NoGPUsLeft {
		t.Errorf("summary %+v", sum)
	}
	for _, ev := range events {
		on := ev.Place.GPUs[0].UUID
		switch {
		case ev.Run.ID == "c" && ev.Attempt == 1:
			if ev.Class != failure.GPUError || !ev.Retry || on != victim {
				t.Errorf("c's first attempt: class %q, retry %v, on %s", ev.Class, ev.Retry, on)
			}
		case on == victim:
			t.Errorf("%s attempt %d ran on the GPU taken out", ev.Run.ID, ev.Attempt)
		}
	}
}

// TestNoGPULeftStopsStarting: once every GPU has reported a fault, no run
// starts, and the summary says why.
func TestNoGPULeftStopsStarting(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1]
	faults := make(chan usage.GPUFault, 1)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	runs := []run.Run{{ID: "first", Args: []string{"bash", "-c", waitFor(release)}, Request: request("gpus=1 cpus=0")}}
	for i := range 3 {
		runs = append(runs, run.Run{ID: "later" + strconv.Itoa(i), Args: []string{"true"}, Request: request("gpus=1 cpus=0")})
	}
	opts := Options{
		Hooks: Hooks{
			GPUFaults: faults,
			OnGPUFault: func(f usage.GPUFault, none bool) {
				if !none {
					t.Error("the only GPU is out, and some are left")
				}
				os.WriteFile(release, nil, 0o644)
			},
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Started && ev.Run.ID == "first" {
					faults <- usage.GPUFault{UUID: topo.GPUs[0].UUID, Reason: "double-bit ECC error", Time: time.Now()}
				}
			},
		},
	}
	sum, events, err := execute(t, t.Context(), func(o *Options) { o.Topology = topo }, opts, runs...)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.NoGPUsLeft || !sum.Drained || len(events) != 1 || sum.Runs != 1 {
		t.Errorf("summary %+v, %d events", sum, len(events))
	}
}

// TestScratchRemovedUnderTheSweep: a temp cleaner that removes nodepack's
// scratch root (the runs' TMPDIRs' parent), and the runs/ directory,
// between runs costs no run: what is missing is made again. (One lane: a
// cleaner that removes a running run's TMPDIR takes it from under that
// run, which no runner can undo.)
func TestScratchRemovedUnderTheSweep(t *testing.T) {
	out := t.TempDir()
	var lines []string
	for range 6 {
		lines = append(lines, `test -d "$TMPDIR" && rm -rf "$(dirname "$TMPDIR")" "$(dirname "$NODEPACK_RUN_DIR")"`)
	}
	sum, events, err := execute(t, t.Context(), lanes(1), Options{Process: Process{OutputDir: out}}, shell(lines...)...)
	if err != nil || sum.Succeeded != len(lines) {
		for _, ev := range events {
			t.Logf("run %d: %s %s %v", ev.Run.Index, ev.Reason, ev.Class, ev.Err)
		}
		t.Fatalf("%d of %d succeeded, err %v; want all, each with a TMPDIR", sum.Succeeded, len(lines), err)
	}
}

// TestSetupFailureFailsTheAttempt: a run whose directory cannot be made
// (a file is in its way) fails as setup, with the reason, and the sweep
// goes on with the other runs.
func TestSetupFailureFailsTheAttempt(t *testing.T) {
	out := t.TempDir()
	runs := shell("true", "true", "true")
	os.MkdirAll(filepath.Join(out, "runs"), 0o755)
	if err := os.WriteFile(filepath.Join(out, "runs", runs[1].DirName()), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, events, err := execute(t, t.Context(), lanes(1), Options{Process: Process{OutputDir: out}}, runs...)
	if err != nil {
		t.Fatalf("Execute: %v, want no error: the sweep goes on", err)
	}
	if sum.Succeeded != 2 || sum.Failed != 1 || sum.Classes[failure.Setup] != 1 {
		t.Errorf("summary %+v, want 2 succeeded and 1 failed as setup", sum)
	}
	for _, ev := range events {
		if ev.Run.Index == 1 && (ev.Class != failure.Setup || ev.Err == nil || !strings.Contains(ev.Err.Error(), "could not set up")) {
			t.Errorf("run 1: class %q, err %v; want setup and why", ev.Class, ev.Err)
		}
	}
}
