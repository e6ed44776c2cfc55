package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/runner/ledger"
)

// exitDeferred is run's exit status when --stop-before stopped it with
// runs left: the batch script requeues the job on it.
const exitDeferred = 3

// printResuming says what an existing ledger holds before a resumed sweep
// starts.
func printResuming(w io.Writer, past *ledger.Log, retired int, retryFailed, chosen bool) {
	if past.Len() == 0 {
		return
	}
	c := past.Count()
	failed := "skipped"
	switch {
	case retryFailed && chosen:
		failed = "those chosen by --retry-class and --retry-run run again"
	case retryFailed:
		failed = "run again: --retry-failed"
	}
	pruned := ""
	if n := c[ledger.StatePruned]; n > 0 {
		pruned = fmt.Sprintf(", %d pruned (skipped)", n)
	}
	if n := c[ledger.StatePaused]; n > 0 {
		pruned += fmt.Sprintf(", %d paused (promoted when they may still win)", n)
	}
	fmt.Fprintf(w, "nodepack: resuming %s: %d succeeded (skipped)%s, %d failed (%s), %d interrupted (run again)\n",
		past.Name, c[ledger.StateSucceeded], pruned, c[ledger.StateFailed], failed, c[ledger.StateInterrupted]+c[ledger.StateRunning])
	if retired > 0 {
		fmt.Fprintf(w, "nodepack: %s of the ledger %s no longer part of this sweep (lines or values removed from its source, or fewer --reps): left out of its counts\n",
			countWord(retired, "run"), map[bool]string{true: "is", false: "are"}[retired == 1])
	}
}

// printSkipped says what the resume did with the runs the ledger knew.
func printSkipped(w io.Writer, c ledger.ResumeCounts) {
	if skippedBefore(c) > 0 {
		fmt.Fprintf(w, "nodepack: %s\n", doneBefore(c, ""))
	}
	var again []string
	if c.Interrupted > 0 {
		again = append(again, countWord(c.Interrupted, "interrupted run"))
	}
	if c.RetriedFailed > 0 {
		again = append(again, countWord(c.RetriedFailed, "failed run"))
	}
	if len(again) > 0 {
		fmt.Fprintf(w, "nodepack: ran again %s\n", strings.Join(again, " and "))
	}
}

// skippedBefore is how many runs a resume skipped as done.
func skippedBefore(c ledger.ResumeCounts) int {
	return c.SkippedSucceeded + c.SkippedPruned + c.SkippedFailed
}

// doneBefore says which runs a resume skipped as done: "skipped 3 runs
// done before: 1 succeeded, 1 pruned, 1 failed (…)"; output names the
// output directory for nodepack retry, "" for none.
func doneBefore(c ledger.ResumeCounts, output string) string {
	s := fmt.Sprintf("skipped %s done before: %d succeeded", countWord(skippedBefore(c), "run"), c.SkippedSucceeded)
	if c.SkippedPruned > 0 {
		s += fmt.Sprintf(", %d pruned", c.SkippedPruned)
	}
	if c.SkippedFailed > 0 {
		retry := "nodepack retry"
		if output != "" {
			retry += " " + shellWord(output)
		}
		s += fmt.Sprintf(", %d failed (--retry-failed or %s runs them again)", c.SkippedFailed, retry)
	}
	return s
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
