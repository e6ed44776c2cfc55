package main

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
)

// TestStaggerSeedWorkflow is clusterduck's seed workflow as its users
// type it, on four fake GPUs: --parallel 4 --stagger D over a Hydra sweep
// of four runs that each end before the stagger is up. The ledger shows
// four runs on four GPUs, each in a lane that had opened: lane k at least
// k staggers after the sweep (its header, written before the first
// start); runs shorter than the stagger reuse the lanes open so far.
func TestStaggerSeedWorkflow(t *testing.T) {
	fourGPUNode(t) // four fake GPUs, or skip
	out := t.TempDir() + "/out"
	const stagger = 300 * time.Millisecond
	code, _, stderr := runCLI(t, "run", "-q", "-o", out, "--parallel", "4", "--stagger", stagger.String(),
		"--sweep", "--", "true", "model=convnet,transformer", "+iteration=range(2)")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	log, err := ledger.ReadFile(out+"/ledger.jsonl", ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	starts := startedRecords(t, log)
	if len(starts) != 4 {
		t.Fatalf("%d runs started, want 4", len(starts))
	}
	slices.SortFunc(starts, func(a, b *ledger.Started) int { return a.Index - b.Index })
	gpus := map[string]bool{}
	for k, r := range starts {
		if len(r.GPUs) != 1 || gpus[r.GPUs[0]] {
			t.Errorf("run %d (%s) got GPUs %v; want one GPU no other run had", k, r.Origin, r.GPUs)
		}
		if len(r.GPUs) > 0 {
			gpus[r.GPUs[0]] = true
		}
		if d := r.Time.Sub(log.Header().Time); r.Lane == nil || d < time.Duration(*r.Lane)*stagger {
			t.Errorf("run %d started %v after the sweep in lane %v, want at least lane×%v", k, d, r.Lane, stagger)
		}
	}
}

// TestStaggerHoldsNoLaterRun: -j 2 --stagger 5s with four instant runs:
// lane 0 runs them one after another as it frees, none waiting for lane
// 1 to open; --stagger 1000h in a job that ends in an hour is capped, with
// a note, and the sweep ends.
func TestStaggerHoldsNoLaterRun(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true # 1\ntrue # 2\ntrue # 3\ntrue # 4\n")
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-j", "2", "--stagger", "5s", "-o", out, tasks)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, started := range startedRecords(t, log) {
		d := started.Time.Sub(log.Header().Time)
		if started.Lane == nil || *started.Lane == 0 && d >= 5*time.Second || d < time.Duration(*started.Lane)*5*time.Second {
			t.Errorf("%s started %v after the sweep in lane %v: a lane holds no run before it opens, and an open one waits for nothing", started.Origin, d, started.Lane)
		}
	}
	fakeCommands(t, map[string]string{"squeue": "exit 1"}) // the end from the job's variable
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("SLURM_JOB_END_TIME", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	code, _, stderr = runCLI(t, "run", "--gpus", "none", "-j", "2", "--stagger", "1000h", "-o", filepath.Join(dir, "capped"), tasks)
	if code != exitOK || !strings.Contains(stderr, "stagger 1000h0m0s: the first wave's 2 lanes would open over 1000h0m0s, past the job's end") || !strings.Contains(stderr, "4 runs: 4 succeeded") {
		t.Errorf("--stagger 1000h in a job of an hour: exit %d, want it capped with a note, and every run run:\n%s", code, stderr)
	}
}

// startedRecords are the last started records of the log's runs.
func startedRecords(t *testing.T, log *ledger.Log) []*ledger.Started {
	t.Helper()
	var starts []*ledger.Started
	err := log.LastAll(func(_ int, s *ledger.Started, _ *ledger.Finished) error {
		if s != nil {
			starts = append(starts, s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return starts
}
