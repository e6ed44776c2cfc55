//go:build linux

package execute

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

func TestDrainStopsStartingOnly(t *testing.T) {
	var x *Execution
	ready := make(chan struct{})
	var once sync.Once
	opts := Options{
		Process: Process{
			TempDir:   t.TempDir(),
			OutputDir: t.TempDir(),
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Started {
					<-ready
					once.Do(x.Drain)
				}
			},
		},
	}
	rec := &recorder{}
	opts.OnEvent = func(next func(run.Event)) func(run.Event) { return func(ev run.Event) { rec.add(ev); next(ev) } }(opts.OnEvent)
	x, err := Start(t.Context(), run.Runs(shell("sleep 0.2", "true", "true")...), place(lanes(1), opts))
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	sum, err := x.Wait()
	events := rec.finished()
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Drained || sum.Runs != 1 || len(events) != 1 || events[0].Reason != run.OK {
		t.Errorf("summary %+v, events %d; want the running run to finish and nothing else to start", sum, len(events))
	}
}

// TestDrainDeadlineInThePastStartsNothing: a batch job already inside its
// stop window starts nothing, however busy the machine: the deadline is
// checked at the moment of each start, not by a timer racing the slots.
func TestDrainDeadlineInThePastStartsNothing(t *testing.T) {
	trials := 300
	if testing.Short() {
		trials = 50
	}
	for trial := range trials {
		dir := t.TempDir()
		opts := Options{Policy: Policy{DrainAt: time.Now().Add(-time.Millisecond)}, Process: Process{TempDir: dir, OutputDir: dir}}
		sum, events, err := execute(t, t.Context(), lanes(4), opts, shell("true", "true", "true", "true", "true", "true")...)
		if err != nil || sum.Runs != 0 || len(events) != 0 || !sum.Drained {
			t.Fatalf("trial %d: err %v, summary %+v, %d events; want nothing started and a drain", trial, err, sum, len(events))
		}
		if entries, _ := os.ReadDir(filepath.Join(dir, "runs")); len(entries) != 0 {
			t.Fatalf("trial %d: %d run directories made for runs that never started", trial, len(entries))
		}
	}
}

// TestSetDeadlinesMovesThem: a drain deadline moved into the past while
// runs go on stops the next start.
func TestSetDeadlinesMovesThem(t *testing.T) {
	var x *Execution
	gate := make(chan struct{})
	rec := &recorder{}
	opts := Options{
		Policy: Policy{
			DrainAt: time.Now().Add(time.Hour),
		},
		Process: Process{
			TempDir:   t.TempDir(),
			OutputDir: t.TempDir(),
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				rec.add(ev)
				if ev.Kind == run.Finished && ev.Run.Index == 0 {
					<-gate
					x.SetDeadlines(time.Now().Add(-time.Second), time.Time{})
				}
			},
		},
	}
	x, err := Start(t.Context(), run.Runs(shell("true", "true", "true")...), place(lanes(1), opts))
	if err != nil {
		t.Fatal(err)
	}
	close(gate)
	sum, err := x.Wait()
	if err != nil || sum.Runs != 1 || !sum.Drained {
		t.Errorf("err %v, summary %+v; want one run, then the moved deadline drains", err, sum)
	}
}

// TestTerminateAtStopsRunningRuns: at the terminate deadline the running
// runs get SIGTERM and end as interrupted, without an error.
func TestTerminateAtStopsRunningRuns(t *testing.T) {
	var x *Execution
	ready := make(chan struct{})
	rec := &recorder{}
	opts := Options{
		Process: Process{
			Grace:     time.Second,
			TempDir:   t.TempDir(),
			OutputDir: t.TempDir(),
		},
		Hooks: Hooks{
			OnEvent: func(ev run.Event) {
				rec.add(ev)
				if ev.Kind == run.Started {
					<-ready
					now := time.Now()
					x.SetDeadlines(now, now.Add(100*time.Millisecond))
				}
			},
		},
	}
	start := time.Now()
	x, err := Start(t.Context(), run.Runs(shell("sleep 30", "true")...), place(lanes(1), opts))
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	sum, err := x.Wait()
	if err != nil {
		t.Fatalf("err = %v; a terminate at the job's end is no error", err)
	}
	events := rec.finished()
	if !sum.Drained || sum.Interrupted != 1 || len(events) != 1 || events[0].ExitCode != 143 || events[0].Signal != "SIGTERM" {
		t.Errorf("summary %+v, events %+v; want one run interrupted by SIGTERM", sum, events)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// fakeSampler records what it was asked to sample.
type fakeSampler struct {
	mu      sync.Mutex
	targets []usage.Target
}

func (f *fakeSampler) Sample(target usage.Target) func() usage.Sampled {
	f.mu.Lock()
	f.targets = append(f.targets, target)
	f.mu.Unlock()
	return func() usage.Sampled { return usage.Sampled{Samples: 3, TreeRSSPeak: 42} }
}

// TestUsage: the kernel's totals (peak RSS, CPU time) of the run's tree,
// the sampler's numbers, and the signal of a run that died of one.
func TestUsage(t *testing.T) {
	sampler := &fakeSampler{}
	_, events, err := execute(t, t.Context(), lanes(1), Options{Hooks: Hooks{Sampler: sampler}},
		run.Run{ID: "big", Args: []string{"bash", "-c", `dd if=/dev/zero of=/dev/null bs=40M count=1 status=none; echo done; echo $$`}},
		run.Run{ID: "segv", Args: []string{"bash", "-c", "kill -SEGV $$"}},
	)
	if err != nil || len(events) != 2 {
		t.Fatalf("%v, %d events", err, len(events))
	}
	big, segv := events[0], events[1]
	if big.Usage.MaxRSS < 40e6 || big.Usage.CPU <= 0 {
		t.Errorf("usage %+v; want ≥ 40 MB peak RSS and some CPU time", big.Usage)
	}
	if big.Usage.Sampled.TreeRSSPeak != 42 || big.Usage.Sampled.Samples != 3 {
		t.Errorf("sampled %+v, want the sampler's", big.Usage.Sampled)
	}
	if segv.ExitCode != 139 || segv.Signal != "SIGSEGV" {
		t.Errorf("exit %d signal %q, want 139 SIGSEGV", segv.ExitCode, segv.Signal)
	}
	// The run printed its own pid: it is the event's PID, and the sampler
	// was pointed at it.
	out := strings.Fields(readLog(t, big.Stdout))
	if len(out) != 2 || out[1] != strconv.Itoa(big.PID) {
		t.Fatalf("run printed %q, event pid %d", out, big.PID)
	}
	if tg := sampler.targets[0]; tg.Root != big.PID || tg.SkipRoot {
		t.Errorf("sample target %+v: want the run's process %d", tg, big.PID)
	}
}

// TestPriorAttemptsContinueCounting: a resumed run's attempt numbers go on
// from the ledger's, and its log is appended to.
func TestPriorAttemptsContinueCounting(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Policy: Policy{Resume: schedule.State{Runs: twoEach{}}}, Process: Process{OutputDir: dir}}
	_, events, err := execute(t, t.Context(), lanes(1), opts, run.Run{ID: "r", Args: []string{"bash", "-c", "echo $NODEPACK_ATTEMPT"}})
	if err != nil || len(events) != 1 {
		t.Fatal(err)
	}
	if events[0].Attempt != 3 || readLog(t, events[0].Stdout) != "--- nodepack: attempt 3 ---\n3\n" {
		t.Errorf("attempt %d, log %q", events[0].Attempt, readLog(t, events[0].Stdout))
	}
}

// twoEach is a past in which every run had two attempts and none was
// paused.
type twoEach struct{}

func (twoEach) PriorAttempts(string) int { return 2 }
func (twoEach) PausedRun(string) bool    { return false }
