package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
)

// exitDeferred is run's exit status when --stop-before stopped it with
// runs left: the batch script requeues the job on it.
const exitDeferred = 3

// terminateMargin is how long before the job's end, beyond --grace, the
// runs still running get SIGTERM under --stop-before: time to write the
// ledger's last records and exit before Slurm's own SIGTERM.
const terminateMargin = 5 * time.Second

// shard is this invocation's shard of the sweep, as the source options
// chose it (--shard, or the array index); 0 of 1 when not sharded.
func (o *runOptions) shard() runner.Shard {
	if o.source.Shard.Count < 1 {
		return runner.Shard{Index: 0, Count: 1}
	}
	return o.source.Shard
}

// defaultOutput is the output directory when -o is not given. Inside a
// batch job it is nodepack-<job id>, which a requeued job (same id) finds
// again. The tasks of a Slurm array have job ids of their own, so a
// sharded array uses the array's id (SLURM_ARRAY_JOB_ID): all shards share
// the directory, each with its own ledger file. An array that is not
// sharded runs the same runs in every task, so each task gets its own
// directory, nodepack-<array id>_<task id>, as Slurm's %A_%a names them.
// Outside a batch job it is nodepack-out.
func defaultOutput(s resources.Scheduler, getenv func(string) (string, bool), sharded bool) string {
	id := s.JobID
	if id == "" {
		return "nodepack-out"
	}
	switch {
	case s.Kind == resources.SchedulerSlurm:
		if arrayID, ok := getenv("SLURM_ARRAY_JOB_ID"); ok && strings.TrimSpace(arrayID) != "" && s.Array != nil {
			id = strings.TrimSpace(arrayID)
			if !sharded {
				id += "_" + strconv.Itoa(s.Array.Index)
			}
		}
	case s.Array != nil && !sharded && (s.Kind == resources.SchedulerSGE || s.Kind == resources.SchedulerLSF):
		// SGE's JOB_ID and LSF's LSB_JOBID are the array's; PBS's job id
		// already names the array element.
		id += "_" + strconv.Itoa(s.Array.Index)
	}
	return "nodepack-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
}

// walltime turns --stop-before into the runner's drain and terminate
// times: no new runs from stopBefore before the job's end, and SIGTERM to
// the running ones grace plus a margin before it (never before the
// drain). It is an error to ask for it when the scheduler does not say when
// the job ends.
func walltime(s resources.Scheduler, stopBefore, grace time.Duration) (drainAt, terminateAt time.Time, err error) {
	if stopBefore <= 0 {
		return time.Time{}, time.Time{}, nil
	}
	if s.EndTime.IsZero() {
		return time.Time{}, time.Time{}, fmt.Errorf("--stop-before: the job's end time is not known (no SLURM_JOB_END_TIME)")
	}
	if grace <= 0 {
		grace = runner.DefaultGrace
	}
	drainAt = s.EndTime.Add(-stopBefore)
	terminateAt = s.EndTime.Add(-grace - terminateMargin)
	if terminateAt.Before(drainAt) {
		terminateAt = drainAt
	}
	return drainAt, terminateAt, nil
}

// printResuming says what an existing ledger holds before a resumed sweep
// starts.
func printResuming(w io.Writer, past *runner.LedgerLog, retryFailed bool) {
	if len(past.Runs) == 0 {
		return
	}
	c := past.Count()
	failed := "skipped"
	if retryFailed {
		failed = "run again: --retry-failed"
	}
	fmt.Fprintf(w, "nodepack: resuming %s: %d succeeded (skipped), %d failed (%s), %d interrupted (run again)\n",
		past.Name, c[runner.StateSucceeded], c[runner.StateFailed], failed, c[runner.StateInterrupted])
}

// printSkipped says what the resume did with the runs the ledger knew.
func printSkipped(w io.Writer, c runner.ResumeCounts) {
	if n := c.SkippedSucceeded + c.SkippedFailed; n > 0 {
		fmt.Fprintf(w, "nodepack: skipped %s done before: %d succeeded", countWord(n, "run"), c.SkippedSucceeded)
		if c.SkippedFailed > 0 {
			fmt.Fprintf(w, ", %d failed (--retry-failed runs them again)", c.SkippedFailed)
		}
		fmt.Fprintln(w)
	}
	if c.Interrupted > 0 || c.RetriedFailed > 0 {
		fmt.Fprintf(w, "nodepack: ran again %d interrupted and %d failed runs\n", c.Interrupted, c.RetriedFailed)
	}
}

// countLeft counts the runs of the source that a rerun would run: neither
// succeeded nor failed (unless retryFailed), before or in this session
// (ended holds this session's final reasons). It reads the source again;
// -1 when it cannot (standard input).
func (o *runOptions) countLeft(args []string, total int, past *runner.LedgerLog, ended map[string]runner.Reason, retryFailed bool) int {
	if total < 0 {
		return -1
	}
	source, closeRuns := o.source.open(args)
	defer closeRuns()
	left := 0
	for run, err := range source {
		if err != nil {
			return -1
		}
		if reason, ok := ended[run.ID]; ok {
			if reason == runner.Interrupted {
				left++
			}
			continue
		}
		state := runner.StatePending
		if r := past.Runs[run.ID]; r != nil {
			state = r.State
		}
		if state != runner.StateSucceeded && (state != runner.StateFailed || retryFailed) {
			left++
		}
	}
	return left
}

// countWord writes "1 run", "3 runs", or "some runs" for a negative n.
func countWord(n int, word string) string {
	switch {
	case n < 0:
		return "some " + word + "s"
	case n == 1:
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// usageSampler adapts resources' sampler to the runner's interface.
type usageSampler struct{ s *resources.UsageSampler }

// newUsageSampler returns a sampler at the interval, or nil for 0.
func newUsageSampler(interval time.Duration) *usageSampler {
	if interval <= 0 {
		return nil
	}
	return &usageSampler{resources.NewUsageSampler(interval)}
}

func (u *usageSampler) Sample(t runner.SampleTarget) func() runner.SampledUsage {
	sampling := u.s.Start(t.Root, t.SkipRoot, t.GPUs)
	return func() runner.SampledUsage {
		got := sampling.Stop()
		out := runner.SampledUsage{Samples: got.Samples, TreeRSSPeak: got.TreeRSSPeak}
		for _, g := range got.GPUs {
			out.GPUs = append(out.GPUs, runner.GPUUsage{UUID: g.UUID, PeakMemoryBytes: g.PeakMemoryBytes, MeanUtilization: g.MeanUtilization, Samples: g.Samples})
		}
		return out
	}
}

func (u *usageSampler) Close() { u.s.Close() }
