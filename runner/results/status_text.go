package results

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nodepack/nodepack/runner/escape"
	"github.com/nodepack/nodepack/runner/failure"
)

// WriteText writes where the sweep stands for a person: the counts by
// state, each shard, the running runs, the GPUs taken out of use, the
// failures with their stderr's last lines, the throughput and the time
// left. Text from runs and inputs is escaped for a terminal.
func (doc *Status) WriteText(w io.Writer) {
	c := doc.Counts
	total := "?"
	if doc.Total != nil {
		total = fmt.Sprint(*doc.Total)
	}
	pruned := ""
	if c.Pruned > 0 {
		pruned = fmt.Sprintf(", %d pruned", c.Pruned)
	}
	if c.Paused > 0 {
		pruned += fmt.Sprintf(", %d paused", c.Paused)
	}
	fmt.Fprintf(w, "%s: %s %s: %d succeeded%s, %d failed, %d interrupted, %d running, %d pending\n",
		escape.Term(doc.Dir), total, plural(c.Succeeded+c.Pruned+c.Paused+c.Failed+c.Interrupted+c.Running+c.Pending, "run"), c.Succeeded, pruned, c.Failed, c.Interrupted, c.Running, c.Pending)
	for _, sh := range doc.Shards {
		if sh.Pool != "" {
			fmt.Fprintf(w, "  %s (pool task %s): %s", escape.Term(sh.File), escape.Term(sh.Pool), sh.State)
		} else {
			fmt.Fprintf(w, "  %s (shard %d/%d): %s", escape.Term(sh.File), sh.Index, sh.Count, sh.State)
		}
		switch sh.State {
		case ShardEnded:
			fmt.Fprintf(w, ": %s", escape.Term(sh.Note))
			if sh.Deferred > 0 {
				fmt.Fprintf(w, ", %s left", count(sh.Deferred, "run"))
			}
		case ShardGone:
			fmt.Fprintf(w, ": nodepack (pid %d) ended without an end record (killed, or its node went down); rerun to resume", sh.PID)
		case ShardOtherSweep:
			fmt.Fprintf(w, ": holds another sweep than the newest ledger here, not counted")
		default:
			fmt.Fprintf(w, " on %s (pid %d) since %s", escape.Term(sh.Host), sh.PID, sh.Started.Local().Format(time.DateTime))
		}
		fmt.Fprintln(w)
	}
	if len(doc.Running) > 0 {
		fmt.Fprintln(w, "running:")
		for _, r := range doc.Running {
			gpus := strings.Join(r.GPUs, ",")
			if gpus == "" {
				gpus = "none"
			}
			fmt.Fprintf(w, "  %s  attempt %d  lane %d  gpus %s  cpus %s  %v  %s\n", escape.Term(r.ID), r.Attempt, r.Lane, escape.Term(gpus), escape.Term(r.CPUs),
				time.Duration(r.Elapsed*float64(time.Second)).Round(time.Second), escape.Term(r.Origin))
		}
	}
	printGPUsOut(w, doc.GPUsOut)
	if l := doc.LostToStops; l.Attempts > 0 {
		fmt.Fprintf(w, "lost to stops: %s steps since their last checkpoints, %v of GPU time (%v of the runs' time), in %s\n",
			strconv.FormatFloat(l.Steps, 'f', -1, 64), time.Duration(l.GPUSeconds*float64(time.Second)).Round(time.Second),
			time.Duration(l.Seconds*float64(time.Second)).Round(time.Second), count(l.Attempts, "attempt"))
	}
	if p := doc.PrunePrior; p != nil {
		var dirs []string
		for _, d := range p.Dirs {
			dirs = append(dirs, fmt.Sprintf("%s (%s, %d finished)", escape.Term(d.Dir), count(d.Runs, "run"), d.Finished))
		}
		if len(dirs) == 0 {
			dirs = []string{"none now"}
		}
		fmt.Fprintf(w, "prune prior: %s: forecasts that learnt from it stopped %s", strings.Join(dirs, ", "), count(p.Stopped, "run"))
		for _, why := range p.Dropped {
			fmt.Fprintf(w, "; dropped: %s", escape.Term(why))
		}
		fmt.Fprintln(w)
	}
	if len(doc.Failures) > 0 {
		fmt.Fprintf(w, "failed: %s\n", failure.Counts(doc.Classes))
		printFailedRuns(w, doc.Failures)
	}
	if doc.RunsPerHour > 0 {
		fmt.Fprintf(w, "throughput %s", rate(doc.RunsPerHour))
		if doc.ETASeconds != nil {
			fmt.Fprintf(w, ", about %v left", time.Duration(*doc.ETASeconds*float64(time.Second)).Round(time.Second))
		}
		fmt.Fprintln(w)
		return
	}
	// Nothing runs: the throughput of the shards' last sessions that
	// ended, side by side (the longest one's time).
	runs, seconds := 0, 0.0
	for _, sh := range doc.Shards {
		if sh.State == ShardEnded {
			runs, seconds = runs+sh.SessionRuns, max(seconds, sh.SessionSeconds)
		}
	}
	if runs > 0 && seconds > 0 {
		fmt.Fprintf(w, "throughput %s: %s in %v, the last session\n", rate(float64(runs)/seconds*3600), count(runs, "run"), roundSeconds(seconds))
	}
}

// rate is a number of runs an hour as a person reads it: per second
// when there are more than an hour's seconds of them.
func rate(perHour float64) string {
	if perHour >= 3600 {
		return fmt.Sprintf("%.1f runs/s", perHour/3600)
	}
	return fmt.Sprintf("%.1f runs/h", perHour)
}

// roundSeconds is s seconds, to the millisecond under a minute and to
// the second above.
func roundSeconds(s float64) time.Duration {
	d := time.Duration(s * float64(time.Second))
	if d < time.Minute {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// WriteFailures writes the failed runs for a person: what failed them,
// their stderr's last lines and their logs, and the GPUs taken out of use.
func (doc *Status) WriteFailures(w io.Writer) {
	defer printGPUsOut(w, doc.GPUsOut)
	if len(doc.Failures) == 0 {
		fmt.Fprintf(w, "%s: no failed runs\n", escape.Term(doc.Dir))
		return
	}
	fmt.Fprintf(w, "%s: %s failed: %s\n", escape.Term(doc.Dir), count(len(doc.Failures), "run"), failure.Counts(doc.Classes))
	printFailedRuns(w, doc.Failures)
}

func printFailedRuns(w io.Writer, runs []RunStatus) {
	for _, r := range runs {
		how := "exit ?"
		switch {
		case r.Signal != "":
			how = r.Signal
		case r.ExitCode != nil:
			how = fmt.Sprint("exit ", *r.ExitCode)
		}
		fmt.Fprintf(w, "  %s  %s (%s)  %s  %s  %s\n", escape.Term(r.ID), escape.Term(string(r.Class)), how, count(r.Attempt, "attempt"), escape.Term(r.Origin), escape.Term(r.Stderr))
		printTail(w, r.StderrTail)
	}
}

// printTail prints a failed run's last stderr lines under it.
func printTail(w io.Writer, lines []string) {
	for _, line := range lines {
		fmt.Fprintf(w, "      | %s\n", escape.Term(line))
	}
}

func printGPUsOut(w io.Writer, gpus []GPUOut) {
	for _, g := range gpus {
		fmt.Fprintf(w, "GPU out of use: %s after %s at %s on %s\n", escape.Term(g.UUID), escape.Term(g.Reason), g.Time.Local().Format(time.DateTime), escape.Term(g.Host))
	}
}

// count writes "1 run", "3 runs".
func count(n int, word string) string { return fmt.Sprintf("%d %s", n, plural(n, word)) }

// plural is word for one, words for any other number.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
