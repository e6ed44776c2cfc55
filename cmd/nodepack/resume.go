package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
)

// exitDeferred is run's exit status when --stop-before stopped it with
// runs left: the batch script requeues the job on it.
const exitDeferred = 3

// printResuming says what an existing ledger holds before a resumed sweep
// starts.
func printResuming(w io.Writer, past *runner.LedgerLog, retired int, retryFailed bool) {
	if len(past.Runs) == 0 {
		return
	}
	c := past.Count()
	failed := "skipped"
	if retryFailed {
		failed = "run again: --retry-failed"
	}
	fmt.Fprintf(w, "nodepack: resuming %s: %d succeeded (skipped), %d failed (%s), %d interrupted (run again)\n",
		past.Name, c[runner.StateSucceeded], c[runner.StateFailed], failed, c[runner.StateInterrupted]+c[runner.StateRunning])
	if retired > 0 {
		fmt.Fprintf(w, "nodepack: %s of the ledger %s no longer part of this sweep (lines or values removed from its source, or fewer --reps): left out of its counts\n",
			countWord(retired, "run"), map[bool]string{true: "is", false: "are"}[retired == 1])
	}
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
		fmt.Fprintf(w, "nodepack: ran again %s and %s\n", countWord(c.Interrupted, "interrupted run"), countWord(c.RetriedFailed, "failed run"))
	}
}

// countWord writes "1 run", "3 runs", or "some runs" for a negative n.
func countWord(n int, word string) string {
	switch {
	case n < 0:
		return "some " + word + "s"
	case n == 1:
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + plural(n, word)
}

// plural is word for one, words for any other number.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
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
