package submit

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nodepack/nodepack/runner/escape"
)

// WriteText writes the document for a terminal: the ledgers' status and,
// for a submitted sweep, the scheduler's side: each submission's tasks by
// state, and every shard whose task has not ended. It reports whether a
// shard's task is gone with runs left to submit again (it died, or never
// started).
func (d *Doc) WriteText(w io.Writer) (lost bool) {
	d.Status.WriteText(w)
	v := d.Scheduler
	if v == nil {
		return false
	}
	pool := v.Pool
	order := []string{"running", "pending", TaskEnded, TaskDied, TaskNotStarted, TaskSuperseded}
	rank := func(s string) int {
		if i := slices.Index(order, s); i >= 0 {
			return i
		}
		return len(order)
	}
	fmt.Fprintf(w, "%s:", v.Scheduler)
	for i, j := range v.Submissions {
		if i > 0 {
			fmt.Fprint(w, ";")
		}
		names := slices.SortedFunc(maps.Keys(j.Tasks), func(a, b string) int {
			return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
		})
		states := make([]string, len(names))
		for i, state := range names {
			states[i] = fmt.Sprintf("%d %s", j.Tasks[state], escape.Term(state))
		}
		which := "shards"
		switch {
		case pool && !strings.ContainsAny(j.Shards, ",-"):
			which = "pool task"
		case pool:
			which = "pool tasks"
		case !strings.ContainsAny(j.Shards, ",-"):
			which = "shard"
		}
		fmt.Fprintf(w, " job %s (%s %s): %s", escape.Term(j.JobID), which, j.Shards, strings.Join(states, ", "))
	}
	fmt.Fprintln(w)
	if v.Error != "" {
		fmt.Fprintf(w, "  the scheduler could not be asked: %s\n", escape.Term(v.Error))
	}
	for _, sh := range v.Shards {
		if sh.State == TaskEnded {
			continue
		}
		if pool {
			fmt.Fprintf(w, "  job %s task %d %s", escape.Term(sh.JobID), sh.Task, escape.Term(sh.State))
		} else {
			fmt.Fprintf(w, "  shard %d: job %s task %d %s", sh.Shard, escape.Term(sh.JobID), sh.Task, escape.Term(sh.State))
		}
		if sh.Node != "" {
			fmt.Fprintf(w, " on %s", escape.Term(sh.Node))
		}
		switch sh.State {
		case TaskDied:
			fmt.Fprint(w, ": not in the queue, and its ledger has no end record (its node died, or it was killed)")
			lost = true
		case TaskNotStarted:
			if sh.Log != "" {
				fmt.Fprintf(w, ": not in the queue, and no ledger: see its log, %s", escape.Term(sh.Log))
			} else {
				fmt.Fprint(w, ": not in the queue, no ledger and no log: it never ran (cancelled before it started, or the scheduler dropped it)")
			}
			lost = true
		}
		if sh.Left > 0 {
			fmt.Fprintf(w, "; %s left", countOf(sh.Left, "run"))
		}
		fmt.Fprintln(w)
	}
	return lost
}
