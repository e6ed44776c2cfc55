//go:build linux

package runner

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDrainStopsStartingOnly(t *testing.T) {
	drain := make(chan struct{})
	var once sync.Once
	opts := Options{Drain: drain, OnEvent: func(ev Event) {
		if ev.Kind == Started {
			once.Do(func() { close(drain) })
		}
	}}
	sum, events, err := execute(t, t.Context(), plainSlots(1), opts, shell("sleep 0.2", "true", "true")...)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Drained || sum.Runs != 1 || len(events) != 1 || events[0].Reason != OK {
		t.Errorf("summary %+v, events %d; want the running run to finish and nothing else to start", sum, len(events))
	}
}

func TestTerminateAtStopsRunningRuns(t *testing.T) {
	start := time.Now()
	opts := Options{Grace: time.Second, DrainAt: start.Add(100 * time.Millisecond), TerminateAt: start.Add(300 * time.Millisecond)}
	sum, events, err := execute(t, t.Context(), plainSlots(1), opts, shell("sleep 30", "true")...)
	if err != nil {
		t.Fatalf("err = %v; a terminate at the job's end is no error", err)
	}
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
	targets []SampleTarget
}

func (f *fakeSampler) Sample(target SampleTarget) func() SampledUsage {
	f.mu.Lock()
	f.targets = append(f.targets, target)
	f.mu.Unlock()
	return func() SampledUsage { return SampledUsage{Samples: 3, TreeRSSPeak: 42} }
}

// TestUsage: the kernel's totals (peak RSS, CPU time) of the run's tree,
// the sampler's numbers, and the signal of a run that died of one.
func TestUsage(t *testing.T) {
	sampler := &fakeSampler{}
	_, events, err := execute(t, t.Context(), plainSlots(1), Options{Sampler: sampler},
		Run{ID: "big", Args: []string{"bash", "-c", `x=$(head -c 40000000 /dev/zero | tr '\0' a); echo ${#x}; echo $$`}},
		Run{ID: "segv", Args: []string{"bash", "-c", "kill -SEGV $$"}},
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
	// The run printed its own pid: it is the event's PID (through a guard
	// too), and the sampler was pointed at the process above it.
	out := strings.Fields(readLog(t, big.Stdout))
	if len(out) != 2 || out[1] != strconv.Itoa(big.PID) {
		t.Fatalf("run printed %q, event pid %d", out, big.PID)
	}
	if guardEnabled.Load() {
		if tg := sampler.targets[0]; tg.Root == big.PID || !tg.SkipRoot {
			t.Errorf("sample target %+v: want the guard, skipped", tg)
		}
	}
}

// TestPriorAttemptsContinueCounting: a resumed run's attempt numbers go on
// from the ledger's, and its log is appended to.
func TestPriorAttemptsContinueCounting(t *testing.T) {
	dir := t.TempDir()
	opts := Options{OutputDir: dir, PriorAttempts: func(id string) int { return 2 }}
	_, events, err := execute(t, t.Context(), plainSlots(1), opts, Run{ID: "r", Args: []string{"bash", "-c", "echo $NODEPACK_ATTEMPT"}})
	if err != nil || len(events) != 1 {
		t.Fatal(err)
	}
	if events[0].Attempt != 3 || readLog(t, events[0].Stdout) != "--- nodepack: attempt 3 ---\n3\n" {
		t.Errorf("attempt %d, log %q", events[0].Attempt, readLog(t, events[0].Stdout))
	}
}
