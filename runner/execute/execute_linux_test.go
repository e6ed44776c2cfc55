//go:build linux

package execute

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
)

// placement says where a test's runs go: how many at once, and on what.
type placement func(*Options)

// place returns opts with the placement p.
func place(p placement, opts Options) Options {
	p(&opts)
	return opts
}

// pinned places runs of one CPU each on the given CPUs, as many at once
// as there are CPUs, skipping the test unless the process may use all of
// them.
func pinned(t *testing.T, cpus ...int) placement {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Skip(err)
	}
	var topo pack.Topology
	for _, c := range cpus {
		if !set.IsSet(c) {
			t.Skipf("CPU %d is not in this process's affinity mask", c)
		}
		topo.CPUs = append(topo.CPUs, pack.CPU{ID: c, Core: c})
	}
	return func(o *Options) {
		o.Topology, o.Request, o.Parallel = topo, pack.Request{CPUs: 1}, len(cpus)
	}
}

// lanes runs up to n runs at once, placed nowhere.
func lanes(n int) placement { return func(o *Options) { o.Parallel = n } }

// shell turns command lines into runs as a task file would: bash -c, an
// id of 12 hex digits, origin test:N.
func shell(lines ...string) []run.Run {
	var runs []run.Run
	for i, line := range lines {
		sum := sha256.Sum256([]byte(strconv.Itoa(i) + "\x00" + line))
		runs = append(runs, run.Run{ID: hex.EncodeToString(sum[:6]), Index: i, Args: []string{"bash", "-c", line},
			Origin: "test:" + strconv.Itoa(i+1)})
	}
	return runs
}

// recorder collects the events of one Execute.
type recorder struct {
	mu     sync.Mutex
	events []run.Event
}

func (r *recorder) add(ev run.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) finished() []run.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []run.Event
	for _, ev := range r.events {
		if ev.Kind == run.Finished {
			out = append(out, ev)
		}
	}
	return out
}

func execute(t *testing.T, ctx context.Context, p placement, opts Options, runs ...run.Run) (Summary, []run.Event, error) {
	t.Helper()
	p(&opts)
	rec := &recorder{}
	if next := opts.OnEvent; next != nil {
		opts.OnEvent = func(ev run.Event) { rec.add(ev); next(ev) }
	} else {
		opts.OnEvent = rec.add
	}
	if opts.OutputDir == "" {
		opts.OutputDir = t.TempDir()
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	sum, err := Execute(ctx, run.Runs(runs...), opts)
	return sum, rec.finished(), err
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAffinityInPlaceFromFirstInstruction(t *testing.T) {
	slots := pinned(t, 0, 1)
	var runs []run.Run
	for i := range 200 {
		runs = append(runs, run.Run{ID: strconv.Itoa(i), Index: i, Args: []string{"grep", "Cpus_allowed_list", "/proc/self/status"}})
	}
	sum, events, err := execute(t, t.Context(), slots, Options{}, runs...)
	if err != nil || sum.Succeeded != 200 {
		t.Fatalf("Execute: %d of 200 succeeded, err %v", sum.Succeeded, err)
	}
	wrong := 0
	for _, ev := range events {
		got := strings.TrimSpace(strings.TrimPrefix(readLog(t, ev.Stdout), "Cpus_allowed_list:"))
		if want := strconv.Itoa(ev.Place.CPUs[0]); got != want {
			wrong++
			t.Logf("run %s in slot %d: Cpus_allowed_list %q, want %q", ev.Run.ID, ev.Lane, got, want)
		}
	}
	if wrong > 0 {
		t.Errorf("%d of 200 runs were not pinned to their lane's CPU", wrong)
	}
	// That the runner's own threads keep the process's mask is the
	// process handle's promise: runner/proc's TestLaunchLeavesThreadsAsTheyWere.
}

// cpuList lists the CPUs of a mask.
func cpuList(set unix.CPUSet) []int {
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func TestEnvInRun(t *testing.T) {
	t.Setenv("ROCR_VISIBLE_DEVICES", "0")
	cpu0 := place(pinned(t, 0), Options{}).Topology.CPUs
	twoGPUs := func(o *Options) {
		o.Topology = pack.Topology{CPUs: cpu0, GPUs: []pack.GPU{gpuA, gpuB}}
		o.Request = pack.Request{GPUs: 2, CPUs: 1}
	}
	r := shell(`echo "$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER|${ROCR_VISIBLE_DEVICES-unset}|$OMP_NUM_THREADS|$NODEPACK_SLOT|$NODEPACK_ATTEMPT|$NODEPACK_CPUS|$X|$(basename $(pwd))"; test -d "$TMPDIR" && test "$TMPDIR" = "$TMP" && test -d "$NODEPACK_RUN_DIR" && echo "$TMPDIR" >&2`)[0]
	r.Dir = t.TempDir()
	os.Mkdir(filepath.Join(r.Dir, "wd"), 0o755)
	r.Dir = filepath.Join(r.Dir, "wd")
	_, events, err := execute(t, t.Context(), twoGPUs, Options{Process: Process{Env: []string{"X=extra"}}}, r)
	if err != nil || len(events) != 1 || events[0].Reason != run.OK {
		t.Fatalf("Execute: %v, events %+v", err, events)
	}
	if got, want := readLog(t, events[0].Stdout), "GPU-aaaa,GPU-bbbb|PCI_BUS_ID|unset|1|0|1|0|extra|wd\n"; got != want {
		t.Errorf("run saw %q, want %q", got, want)
	}
	tmp := strings.TrimSpace(readLog(t, events[0].Stderr))
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("private TMPDIR %q still there after the sweep (err %v)", tmp, err)
	}
}

// TestPrivateTMPDIR: every run starts with an empty TMPDIR of its own,
// whatever the run before it on the same lane left there or did to it.
func TestPrivateTMPDIR(t *testing.T) {
	var runs []run.Run
	elsewhere := filepath.Join(t.TempDir(), "empty")
	for i, mess := range []string{"touch $TMPDIR/left", "mkdir $TMPDIR/d; touch $TMPDIR/d/f; chmod 500 $TMPDIR/d", "chmod 755 $TMPDIR", "true", "touch $TMPDIR/.hidden",
		"chmod 1700 $TMPDIR", "true",
		// An empty 0700 directory in its place, behind a symbolic link.
		"mkdir -m 700 " + elsewhere + " && rmdir $TMPDIR && ln -s " + elsewhere + " $TMPDIR", "true"} {
		runs = append(runs, run.Run{ID: strconv.Itoa(i), Args: []string{"bash", "-c", `test -z "$(ls -A $TMPDIR)" && test "$(stat -c %a $TMPDIR)" = 700 || echo not private; ` + mess}})
	}
	_, events, err := execute(t, t.Context(), lanes(1), Options{}, runs...)
	if err != nil || len(events) != len(runs) {
		t.Fatalf("%v, %d events", err, len(events))
	}
	for _, ev := range events {
		if ev.Reason != run.OK || readLog(t, ev.Stdout) != "" {
			t.Errorf("run %s: %s, printed %q", ev.Run.ID, ev.Reason, readLog(t, ev.Stdout))
		}
	}
}

func TestWrap(t *testing.T) {
	_, events, err := execute(t, t.Context(), lanes(1), Options{Process: Process{Wrap: []string{"env", "WRAPPED=yes"}}},
		shell(`echo $WRAPPED`)...)
	if err != nil || len(events) != 1 || events[0].Reason != run.OK {
		t.Fatal(err, events)
	}
	if got := readLog(t, events[0].Stdout); got != "yes\n" {
		t.Errorf("wrapped run printed %q", got)
	}
}

func TestExitCodes(t *testing.T) {
	sum, events, err := execute(t, t.Context(), lanes(2), Options{},
		run.Run{ID: "ok", Args: []string{"true"}},
		run.Run{ID: "three", Args: []string{"bash", "-c", "exit 3"}},
		run.Run{ID: "abort", Args: []string{"bash", "-c", "kill -ABRT $$"}},
		run.Run{ID: "missing", Args: []string{"/nonexistent/command"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		code   int
		reason run.Reason
	}{"ok": {0, run.OK}, "three": {3, run.Failed}, "abort": {134, run.Failed}, "missing": {-1, run.Failed}}
	for _, ev := range events {
		w := want[ev.Run.ID]
		if ev.ExitCode != w.code || ev.Reason != w.reason {
			t.Errorf("run %s: exit %d %s, want %d %s", ev.Run.ID, ev.ExitCode, ev.Reason, w.code, w.reason)
		}
		if (ev.Run.ID == "missing") != (ev.Err != nil) {
			t.Errorf("run %s: Err = %v", ev.Run.ID, ev.Err)
		}
	}
	if sum.Runs != 4 || sum.Succeeded != 1 || sum.Failed != 3 || len(sum.Failures) != 3 {
		t.Errorf("summary %+v", sum)
	}
}

// TestSignalledWithTheSweep: a batch system signals every process of a job
// at once, so a run can die of SIGTERM just before nodepack's own context is
// cancelled. That run was interrupted, not failed.
// TestSignalledWithTheSweep: a run that dies of SIGTERM just before the
// sweep is stopped (the batch system signalled every process of the job)
// was interrupted, not failed.
func TestSignalledWithTheSweep(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dying := filepath.Join(t.TempDir(), "dying")
	go func() {
		for {
			if _, err := os.Stat(dying); err == nil {
				cancel() // the batch system's SIGTERM reaches nodepack too
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	_, events, _ := execute(t, ctx, lanes(1), Options{},
		run.Run{ID: "scancelled", Args: []string{"bash", "-c", "touch " + dying + "; kill -TERM $$"}})
	if len(events) != 1 || events[0].ExitCode != 143 || events[0].Reason != run.Interrupted {
		t.Errorf("events %+v; want one run, exit 143, interrupted", events)
	}
}

func TestTimeout(t *testing.T) {
	// env ignores SIGTERM before it execs sleep, and sleep keeps it
	// ignored; the timeout leaves env a second and a half to get there,
	// which a loaded machine needs (at 200 ms, two CPU hogs and the race
	// detector once had the SIGTERM come first).
	const timeout, grace = 1500 * time.Millisecond, 200 * time.Millisecond
	start := time.Now()
	sum, events, err := execute(t, t.Context(), lanes(2), Options{Process: Process{Timeout: timeout, Grace: grace}},
		run.Run{ID: "polite", Args: []string{"sleep", "30"}},
		run.Run{ID: "stubborn", Args: []string{"env", "--ignore-signal=TERM", "sleep", "30"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v: the runs were not stopped", d)
	}
	codes := map[string]int{}
	for _, ev := range events {
		if ev.Reason != run.TimedOut {
			t.Errorf("run %s: reason %s, want timeout", ev.Run.ID, ev.Reason)
		}
		codes[ev.Run.ID] = ev.ExitCode
	}
	if codes["polite"] != 143 || codes["stubborn"] != 137 {
		t.Errorf("exit codes %v, want polite 143 (SIGTERM), stubborn 137 (SIGKILL)", codes)
	}
	if sum.Failed != 2 || sum.TimedOut != 2 {
		t.Errorf("summary %+v", sum)
	}
}

func TestRetries(t *testing.T) {
	sum, events, err := execute(t, t.Context(), lanes(1), Options{Policy: Policy{Retries: 3}},
		shell(`echo "try $NODEPACK_ATTEMPT"; test "$NODEPACK_ATTEMPT" -ge 3`, `exit 7`)...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		got = append(got, fmt.Sprintf("%d:%d:%s:%v", ev.Run.Index, ev.Attempt, ev.Reason, ev.Retry))
	}
	want := "0:1:failed:true 0:2:failed:true 0:3:ok:false 1:1:failed:true 1:2:failed:true 1:3:failed:true 1:4:failed:false"
	if strings.Join(got, " ") != want {
		t.Errorf("attempts = %s\nwant       %s", strings.Join(got, " "), want)
	}
	if sum.Runs != 2 || sum.Attempts != 7 || sum.Succeeded != 1 || sum.Failed != 1 {
		t.Errorf("summary %+v", sum)
	}
	log := readLog(t, events[2].Stdout)
	if want := "try 1\n--- nodepack: attempt 2 ---\ntry 2\n--- nodepack: attempt 3 ---\ntry 3\n"; log != want {
		t.Errorf("stdout.log = %q, want %q", log, want)
	}
}

func TestFailFast(t *testing.T) {
	sum, events, err := execute(t, t.Context(), lanes(1), Options{Policy: Policy{MaxFailures: 1, Retries: 2}},
		shell("true", "exit 1", "true", "true")...)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 || sum.Runs != 2 || sum.Failed != 1 || !sum.Stopped {
		t.Errorf("events %d, summary %+v; want 2 runs (1 + 3 attempts), stopped", len(events), sum)
	}
	sum, _, _ = execute(t, t.Context(), lanes(1), Options{Policy: Policy{MaxFailures: 2}}, shell("exit 1", "true", "exit 1", "true")...)
	if sum.Runs != 3 || !sum.Stopped {
		t.Errorf("MaxFailures 2: summary %+v, want 3 runs, stopped", sum)
	}
	sum, _, _ = execute(t, t.Context(), lanes(1), Options{}, shell("exit 1", "exit 1", "true")...)
	if sum.Runs != 3 || sum.Stopped {
		t.Errorf("default: summary %+v, want all 3 runs", sum)
	}
}

// TestStagger: the k-th start of the first wave (as many runs as fit at
// once) is not before k×Stagger, each goes to a GPU none of the wave has
// used while there is one — also when every run ends before the next
// starts — and later starts do not wait. The lower bounds are exact:
// Event.Start is taken after the waits, and timers never fire early.
func TestStagger(t *testing.T) {
	gpu1 := pack.Request{GPUs: 1}
	tests := []struct {
		description string
		runs        []string
		parallel    int
		stagger     time.Duration
		wave        int // the first starts, each on a GPU of its own
	}{
		{"runs shorter than the stagger: lane 0 runs them as it frees, on four GPUs", []string{"true", "true", "true", "true"}, 0, 150 * time.Millisecond, 4},
		{"runs longer than the stagger: lane k opens k staggers in", []string{"sleep 1", "sleep 1", "sleep 1", "sleep 1"}, 0, 100 * time.Millisecond, 4},
		{"more runs than fit", []string{"true", "true", "true", "true", "true", "true", "true", "true"}, 0, time.Second, 4},
		{"--parallel 2 on four GPUs", []string{"true", "true", "true", "true"}, 2, time.Second, 2},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			topo := fourGPUs(t)
			sum, events, err := execute(t, t.Context(), func(o *Options) { o.Topology, o.Request, o.Parallel = topo, gpu1, tc.parallel },
				Options{Policy: Policy{Stagger: tc.stagger}}, shell(tc.runs...)...)
			if err != nil || sum.Succeeded != len(tc.runs) {
				t.Fatalf("Execute: %d of %d succeeded, %v", sum.Succeeded, len(tc.runs), err)
			}
			// No run starts in a lane before the lane opens: lane k at
			// k×stagger after the sweep's start.
			for _, ev := range events {
				if d := ev.Start.Sub(sum.Start); d < time.Duration(ev.Lane)*tc.stagger {
					t.Errorf("run %d started in lane %d %v after the sweep's start, before the lane opened at %v", ev.Run.Index, ev.Lane, d, time.Duration(ev.Lane)*tc.stagger)
				}
			}
			// The first starts of the sweep go to GPUs none of them had.
			slices.SortFunc(events, func(a, b run.Event) int { return a.Start.Compare(b.Start) })
			used := map[string]int{}
			for k, ev := range events[:tc.wave] {
				gpu := ev.Place.UUIDs()[0]
				if k2, ok := used[gpu]; ok {
					t.Errorf("starts %d and %d of the first wave both went to %s, with GPUs left unused", k2, k, gpu)
				}
				used[gpu] = k
			}
		})
	}
}

// TestMinStartInterval: every two starts are at least MinStartInterval
// apart.
func TestMinStartInterval(t *testing.T) {
	const interval = 100 * time.Millisecond
	rec := &recorder{}
	_, err := Execute(t.Context(), run.Runs(shell("true", "true", "true", "true")...),
		place(lanes(2), Options{Policy: Policy{MinStartInterval: interval}, Process: Process{TempDir: t.TempDir()}, Hooks: Hooks{OnEvent: rec.add}}))
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for _, ev := range rec.finished() {
		starts = append(starts, ev.Start)
	}
	slices.SortFunc(starts, time.Time.Compare)
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < interval {
			t.Errorf("starts %d and %d only %v apart, want ≥ %v", i-1, i, gap, interval)
		}
	}
}

func TestCancelInterruptsWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	sum, _, err := execute(t, ctx, lanes(2), Options{Policy: Policy{Stagger: time.Hour}}, shell("sleep 30", "sleep 31")...)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Execute took %v after cancel: the runs (30 s) were not stopped, or the stagger (an hour) still waited", d)
	}
	if sum.Interrupted != 1 || sum.Runs != 1 {
		t.Errorf("summary %+v, want 1 interrupted run, the staggered one never started", sum)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// pidsIn reads the pids the runs printed, one per line.
func pidsIn(t *testing.T, events []run.Event) []int {
	var pids []int
	for _, ev := range events {
		for _, f := range strings.Fields(readLog(t, ev.Stdout)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("run %s printed %q", ev.Run.ID, f)
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// exists reports whether /proc/pid exists at all (alive or zombie).
func exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

const tree = `setsid sleep 300 & echo $!; sleep 300 & echo $!; (trap '' TERM; sleep 300 & echo $!; wait) & echo $!; bash -c 'setsid bash -c "sleep 300 & echo \$!; wait" & wait' & echo $!; wait`

func TestCancelLeavesNoProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	out := t.TempDir()
	started := make(chan struct{}, 2)
	opts := Options{
		Process: Process{
			Grace:     300 * time.Millisecond,
			OutputDir: out,
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Started {
					started <- struct{}{}
				}
			},
		},
	}
	var sum Summary
	var events []run.Event
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, events, err = execute(t, ctx, lanes(2), opts, shell(tree, tree, "true")...)
	}()
	<-started
	<-started
	// Each tree prints its 6 pids as it grows: wait until all are out.
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
		lines := 0
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines += strings.Count(string(b), "\n")
		}
		if lines >= 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trees printed %d pids, want 12", lines)
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context canceled", err)
	}
	if sum.Interrupted != 2 || sum.Runs != 2 {
		t.Errorf("summary %+v, want 2 interrupted runs and no new start", sum)
	}
	pids := pidsIn(t, events)
	if len(pids) < 8 {
		t.Fatalf("runs reported %d pids, want ≥ 8", len(pids))
	}
	for _, pid := range pids {
		if exists(pid) {
			t.Errorf("pid %d is still there after Execute returned (alive %v)", pid, alive(pid))
		}
	}
}

func TestNormalExitLeavesNoProcess(t *testing.T) {
	normalExitLeavesNoProcess(t)
}

// TestNoProcessLeftWithoutChildrenFiles sweeps as on a kernel without
// /proc/PID/task/TID/children: by every process's stat.
func TestNoProcessLeftWithoutChildrenFiles(t *testing.T) {
	t.Cleanup(proc.SetKnobs(proc.Knobs{NoChildrenFiles: true}))
	normalExitLeavesNoProcess(t)
}

func normalExitLeavesNoProcess(t *testing.T) {
	_, events, err := execute(t, t.Context(), lanes(1), Options{},
		shell(`setsid sleep 300 & echo $!; sleep 300 & echo $!`, `setsid bash -c 'sleep 300 & echo $!; setsid sleep 300 & echo $!; wait' & sleep 0.1`)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pidsIn(t, events) {
		if exists(pid) {
			t.Errorf("pid %d is still there after its run ended", pid)
		}
	}
}

// TestGrandchildHoldingOutputDoesNotHang: a run whose grandchild leaves
// its group holding the run's output pipe (Live) ends when the run does:
// the sweeper kills the holder, and the wait for the pipe never comes to
// its bound (set past the test's own deadline here, so that a sweep that
// waited for it would hang, not pass late on a loaded machine).
func TestGrandchildHoldingOutputDoesNotHang(t *testing.T) {
	delay := waitDelay
	waitDelay = time.Hour
	t.Cleanup(func() { waitDelay = delay })
	var live bytes.Buffer
	done := make(chan struct{})
	var events []run.Event
	var err error
	go func() {
		defer close(done)
		_, events, err = execute(t, t.Context(), lanes(1), Options{Process: Process{Live: &syncBuffer{b: &live}}},
			shell(`setsid sleep 300 & echo $!; echo bye`)...)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the sweep waits on the pipe its run's grandchild holds")
	}
	if err != nil || len(events) != 1 || events[0].Reason != run.OK {
		t.Fatalf("Execute: %v %+v", err, events)
	}
	if !strings.Contains(live.String(), "] bye\n") {
		t.Errorf("live output %q", live.String())
	}
}

func TestKillAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	started := make(chan struct{}, 1)
	rec := &recorder{}
	opts := Options{
		Process: Process{
			Grace:     time.Hour,
			TempDir:   dir,
			OutputDir: dir,
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				rec.add(ev)
				if ev.Kind == run.Started {
					started <- struct{}{}
				}
			},
		},
	}
	x, err := Start(ctx, run.Runs(shell(`trap '' TERM; sleep 300 & echo $!; touch `+ready+`; wait; wait`)...), place(lanes(1), opts))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	waitForFile(t, ready) // the run ignores SIGTERM from here on
	cancel()              // SIGTERM, ignored
	x.Kill()
	done := make(chan struct{})
	var sum Summary
	go func() {
		defer close(done)
		sum, err = x.Wait()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Kill")
	}
	events := rec.finished()
	if sum.Interrupted != 1 || len(events) != 1 || events[0].ExitCode != 137 {
		t.Fatalf("summary %+v, events %+v; want interrupted, 137", sum, events)
	}
	for _, pid := range pidsIn(t, events) {
		if exists(pid) {
			t.Errorf("pid %d survived", pid)
		}
	}
}

// waitForFile waits for a file a run makes to say it got somewhere.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func TestLiveLinesDoNotInterleave(t *testing.T) {
	var live bytes.Buffer
	loop := `for i in $(seq 300); do echo "$NODEPACK_RUN_ID line $i"; echo "$NODEPACK_RUN_ID err $i" >&2; done; printf "$NODEPACK_RUN_ID tail"`
	_, events, err := execute(t, t.Context(), lanes(2), Options{Process: Process{Live: &syncBuffer{b: &live}}}, shell(loop, loop+" ", loop+"  ")...)
	if err != nil || len(events) != 3 {
		t.Fatal(err, events)
	}
	// Lines are prefixed with the run's origin; each run prints its own id.
	idOf := map[string]string{}
	for _, ev := range events {
		idOf[ev.Run.Origin] = ev.Run.ID
	}
	line := regexp.MustCompile(`^\[(test:\d)\] ([0-9a-f]{12}) (line \d+|err \d+|tail)$`)
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(live.String(), "\n"), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || idOf[m[1]] != m[2] {
			t.Fatalf("live line %q is mixed up", l)
		}
		n++
	}
	if n != 3*601 {
		t.Errorf("%d live lines, want %d", n, 3*601)
	}
	if got := readLog(t, events[0].Stdout); !strings.HasSuffix(got, "line 300\n"+events[0].Run.ID+" tail") {
		t.Errorf("stdout.log ends %q", got[max(0, len(got)-40):])
	}
}

func TestSourceError(t *testing.T) {
	bad := errors.New("bad input")
	source := func(yield func(run.Run, error) bool) {
		if yield(run.Run{ID: "a", Args: []string{"true"}}, nil) {
			yield(run.Run{}, bad)
		}
	}
	sum, err := Execute(t.Context(), source, place(lanes(1), Options{Process: Process{TempDir: t.TempDir()}}))
	if !errors.Is(err, bad) || sum.Runs != 1 {
		t.Errorf("err %v, summary %+v; want bad input after 1 run", err, sum)
	}
	_, err = Execute(t.Context(), run.Runs(run.Run{ID: "../x", Args: []string{"true"}}), place(lanes(1), Options{Process: Process{TempDir: t.TempDir()}}))
	if err == nil {
		t.Error("a run id with a slash was accepted")
	}
	_, err = Execute(t.Context(), run.Runs(), Options{Policy: Policy{Parallel: -1}})
	if err == nil {
		t.Error("a negative Parallel was accepted")
	}
	_, err = Execute(t.Context(), run.Runs(), Options{Policy: Policy{Request: pack.Request{GPUs: 1}}})
	if err == nil {
		t.Error("a request for a GPU without a Topology was accepted")
	}
	_, err = Execute(t.Context(), run.Runs(), Options{Policy: Policy{Topology: pack.Topology{CPUs: []pack.CPU{{ID: 0}}}, Request: pack.Request{GPUs: 1}}})
	if err == nil || !errors.Is(err, pack.ErrNeverFits) {
		t.Errorf("a request for a GPU on a node without one: %v, want ErrNeverFits", err)
	}
}

func TestInvalidCPUIsASetupError(t *testing.T) {
	topo := pack.Topology{CPUs: []pack.CPU{{ID: 1000}}}
	sum, err := Execute(t.Context(), run.Runs(shell("true", "true")...), Options{Policy: Policy{Topology: topo, Request: pack.Request{CPUs: 1}}, Process: Process{TempDir: t.TempDir()}})
	if err == nil || sum.Runs != 0 {
		t.Errorf("err %v, summary %+v; want a setup error and no run", err, sum)
	}
}

// startPaths runs a test on every way a run starts: directly from its
// goroutine's thread with the supervisor (a program that called
// MaybeGuard, like nodepack) and without it (an embedder that did not),
// and from a spawner thread, as runs in a memory cgroup and runs beyond
// directLimit do.
func startPaths(t *testing.T, test func(t *testing.T)) {
	if err := proc.Setup(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"supervised", "unsupervised", "spawner"} {
		t.Run(path, func(t *testing.T) {
			var k proc.Knobs
			switch {
			case path == "unsupervised":
				k.Unsupervised = true
			case !proc.Supervised():
				t.Skip("the test binary did not call MaybeGuard")
			case path == "spawner":
				k.Spawner = true
			}
			defer proc.SetKnobs(k)()
			test(t)
		})
	}
}

// TestEveryStartPath: runs are pinned, time out, stop with the sweep or at
// once, and leave nothing behind, however they started.
func TestEveryStartPath(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		t.Run("affinity", TestAffinityInPlaceFromFirstInstruction)
		t.Run("timeout", TestTimeout)
		t.Run("cancel", TestCancelInterruptsWaits)
		t.Run("kill", TestKillAtOnce)
		t.Run("exit status", TestExitCodes)
	})
}

// TestRunStartingAsTheSweepStops: a run whose process starts just as the
// sweep is being stopped, after the stop went through the running runs,
// is stopped too (SIGTERM) and ends interrupted.
func TestRunStartingAsTheSweepStops(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		e := &Execution{ctx: t.Context(), grace: 10 * time.Second, life: newLife()}
		e.procs.StopAll() // the stop went through the running runs
		p, err := proc.Launch(proc.Spec{Cmd: exec.Command("sleep", "30"), Key: proc.Key{Run: "late", Attempt: 1}})
		if err != nil {
			t.Fatal(err)
		}
		st := e.watch(p)
		exit := p.Wait()
		reason := e.unwatch(st)
		if reason != run.Interrupted || exit.Signal != "SIGTERM" {
			t.Errorf("reason %q, signal %q; want interrupted by SIGTERM", reason, exit.Signal)
		}
		if n := e.procs.Len(); n != 0 {
			t.Errorf("%d runs still registered for stops", n)
		}
	})
}

// TestStartErrorsKeepTheirType: a run that cannot start fails with the
// error exec gave, which errors.Is can tell, with a supervisor or without.
func TestStartErrorsKeepTheirType(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		dir := t.TempDir()
		notExec := filepath.Join(dir, "not-executable")
		os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
		gone := filepath.Join(dir, "gone")
		os.WriteFile(gone, []byte("#!/bin/sh\n"), 0o755)
		_, events, err := execute(t, t.Context(), lanes(1), Options{},
			run.Run{ID: "missing", Args: []string{"no-such-program-x"}},
			run.Run{ID: "not-executable", Args: []string{notExec}},
		)
		if err != nil || len(events) != 2 {
			t.Fatalf("%v, %d events", err, len(events))
		}
		if ev := events[0]; !errors.Is(ev.Err, exec.ErrNotFound) || ev.ExitCode != -1 || ev.Reason != run.Failed {
			t.Errorf("missing program: err %v, exit %d, %s; want exec.ErrNotFound, -1, failed", ev.Err, ev.ExitCode, ev.Reason)
		}
		if ev := events[1]; !errors.Is(ev.Err, fs.ErrPermission) {
			t.Errorf("not executable: err %v (%T); want fs.ErrPermission", ev.Err, ev.Err)
		}
		// A program found when its command is made, gone when it starts:
		// exec itself fails.
		var paths pathCache
		cmd := paths.command([]string{gone})
		os.Remove(gone)
		cmd.Env = os.Environ()
		p, err := proc.Launch(proc.Spec{Cmd: cmd, Key: proc.Key{Run: "gone", Attempt: 1}})
		var se *proc.StartError
		if p != nil || !errors.As(err, &se) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a program gone between lookup and start: %v (%T); want a start error that is fs.ErrNotExist", err, err)
		}
	})
}

// TestNoProcessLeftEitherWay: a normal end and a cancellation leave no
// process of a run's tree behind, with a supervisor or without one, from
// a spawner or not.
func TestNoProcessLeftEitherWay(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		TestNormalExitLeavesNoProcess(t)
		TestCancelLeavesNoProcess(t)
	})
}

// TestPlainLinesAsBashRunsThem: a task line that is one plain command is
// started without bash, and what the program sees is what it sees
// through bash -c: its arguments, and the environment bash gives a
// command it execs (PWD, SHLVL, _, no OLDPWD that is no directory). A
// script without #! (bash runs it as one of its own), an exported bash
// function of the command's name and a builtin's name go through bash.
func TestPlainLinesAsBashRunsThem(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "noshebang")
	os.WriteFile(script, []byte("echo script ran\n"), 0o755)
	t.Setenv("OLDPWD", "/nonexistent")
	t.Setenv("BASH_FUNC_greet%%", "() {  echo function ran\n}")
	lines := []string{
		"env",
		script,
		"greet",
		"printf %s plain-printf", // printf is a builtin: bash's
	}
	_, events, err := execute(t, t.Context(), lanes(1), Options{}, shell(lines...)...)
	if err != nil || len(events) != len(lines) {
		t.Fatalf("%v, %d events", err, len(events))
	}
	out := map[string]string{}
	for _, ev := range events {
		if ev.Reason != run.OK {
			t.Errorf("%q: %s exit %d: %s", ev.Run.Args[2], ev.Reason, ev.ExitCode, readLog(t, ev.Stderr))
		}
		out[ev.Run.Args[2]] = readLog(t, ev.Stdout)
	}
	bash := exec.Command("bash", "-c", "env")
	bash.Env = os.Environ()
	want, err := bash.Output()
	if err != nil {
		t.Fatal(err)
	}
	pick := func(env string) map[string]string {
		m := map[string]string{}
		for _, kv := range strings.Split(env, "\n") {
			k, v, _ := strings.Cut(kv, "=")
			if k == "PWD" || k == "SHLVL" || k == "_" || k == "OLDPWD" {
				m[k] = v
			}
		}
		return m
	}
	if got, w := pick(out["env"]), pick(string(want)); !maps.Equal(got, w) {
		t.Errorf("a plain line's program saw %v; through bash -c it sees %v", got, w)
	}
	if out[script] != "script ran\n" || out["greet"] != "function ran\n" || out["printf %s plain-printf"] != "plain-printf" {
		t.Errorf("outputs %q", out)
	}
}
