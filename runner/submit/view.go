package submit

import (
	"context"
	"slices"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Task states a View gives beside the scheduler's own (pending, running,
// held, …).
const (
	TaskEnded      = "ended"       // not queued; its shard's ledger has an end record
	TaskDied       = "died"        // not queued; its shard's ledger has no end record: its node died or it was killed
	TaskNotStarted = "not started" // not queued; its shard has no ledger: see the task's log
	TaskUnknown    = "unknown"     // the scheduler could not be asked
	TaskSuperseded = "resubmitted" // a later submission runs its shard
)

// View is the scheduler's side of a sweep's status: its submissions, and
// the state of each shard's newest array task.
type View struct {
	Scheduler   Scheduler   `json:"scheduler"`
	Submissions []JobView   `json:"submissions"`
	Shards      []ShardView `json:"shards"` // by shard index
	// Error says why the scheduler could not be asked; the shards' states
	// then come from their ledgers alone.
	Error string `json:"error,omitempty"`
}

// JobView is one submission and how many of its tasks are in each state.
type JobView struct {
	JobID     string         `json:"job_id"`
	Submitted time.Time      `json:"submitted"`
	Shards    string         `json:"shards"` // the shards it runs: 0-2, 1,4
	Tasks     map[string]int `json:"tasks"`  // by state
}

// ShardView is one shard of the sweep, as its newest submission's task
// left it.
type ShardView struct {
	Shard int    `json:"shard"`
	JobID string `json:"job_id"`
	Task  int    `json:"task"` // the array task, as the scheduler counts it
	State string `json:"state"`
	Node  string `json:"node,omitempty"`
	Note  string `json:"note,omitempty"` // the ledger's end record's
	Left  int    `json:"left"`           // the shard's runs not finished for good (-1: not known)
}

// Look asks the scheduler about recs' jobs and joins what it says with
// the shards' ledgers (from ledger.ReadStatus) into a View. The queue is
// asked once; queue, when not nil, replaces asking it (for tests).
func Look(ctx context.Context, recs []Record, shards []ledger.ShardStatus, queue func(context.Context, Scheduler, []string) ([]Task, error)) View {
	if len(recs) == 0 {
		return View{}
	}
	if queue == nil {
		queue = Queue
	}
	v := View{Scheduler: recs[len(recs)-1].Job.Scheduler, Submissions: []JobView{}, Shards: []ShardView{}}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.JobID
	}
	queued := map[string]map[int]Task{}
	tasks, err := queue(ctx, v.Scheduler, ids)
	if err != nil {
		v.Error = err.Error()
	}
	for _, t := range tasks {
		if queued[t.Job] == nil {
			queued[t.Job] = map[int]Task{}
		}
		queued[t.Job][t.Task] = t
	}
	ledgers := map[int]ledger.ShardStatus{}
	count := recs[len(recs)-1].Job.Shards
	for _, sh := range shards {
		if sh.State != ledger.ShardOtherSweep && max(sh.Count, 1) == count {
			ledgers[sh.Index] = sh
		}
	}
	newest := map[int]int{} // shard → the newest record that runs it
	for i, r := range recs {
		for _, s := range r.Job.tasks() {
			newest[s] = i
		}
	}
	for i, r := range recs {
		jv := JobView{JobID: r.JobID, Submitted: r.Time, Shards: spans(r.Job.tasks()), Tasks: map[string]int{}}
		for k, s := range r.Job.tasks() {
			task := r.Job.taskID(k)
			sv := ShardView{Shard: s, JobID: r.JobID, Task: task, Left: -1}
			sh, hasLedger := ledgers[s]
			if hasLedger {
				sv.Left = sh.Left
			}
			t, inQueue := queued[r.JobID][task]
			switch {
			case inQueue:
				sv.State, sv.Node = t.State, t.Node
			case newest[s] != i:
				sv.State = TaskSuperseded
			case hasLedger && sh.State == ledger.ShardEnded && (v.Error == "" || sh.Deferred == 0):
				// Ended, and not to be requeued when the queue is not known.
				sv.State, sv.Note = TaskEnded, sh.Note
			case v.Error != "":
				sv.State = TaskUnknown
			case !hasLedger:
				sv.State = TaskNotStarted
			default:
				sv.State, sv.Node = TaskDied, sh.Host
			}
			jv.Tasks[sv.State]++
			if newest[s] == i {
				v.Shards = append(v.Shards, sv)
			}
		}
		v.Submissions = append(v.Submissions, jv)
	}
	slices.SortFunc(v.Shards, func(a, b ShardView) int { return a.Shard - b.Shard })
	return v
}

// Active returns the shards whose newest task the scheduler still has
// queued or running (any state but the ones a View gives itself).
func (v View) Active() []ShardView {
	var active []ShardView
	for _, s := range v.Shards {
		switch s.State {
		case TaskEnded, TaskDied, TaskNotStarted, TaskSuperseded:
		default:
			active = append(active, s)
		}
	}
	return active
}

// Left returns the shards of a sweep of count shards, whose source has
// total runs now, that have runs left, by their ledgers (from
// ledger.ReadStatus): a shard without a ledger, one with runs pending,
// running or interrupted (one whose total is not known: without an end
// record, or with runs deferred), one with more runs now than its ledger
// knew (the source grew), and, with retryFailed, one with failed runs.
func Left(count, total int, shards []ledger.ShardStatus, retryFailed bool) []int {
	byIndex := map[int]ledger.ShardStatus{}
	for _, sh := range shards {
		if sh.State != ledger.ShardOtherSweep && max(sh.Count, 1) == count {
			byIndex[sh.Index] = sh
		}
	}
	var left []int
	for i := range count {
		sh, ok := byIndex[i]
		switch {
		case !ok,
			sh.Left > 0,
			sh.Left < 0 && (sh.State != ledger.ShardEnded || sh.Deferred > 0),
			sh.Total >= 0 && (sweep.Shard{Index: i, Count: count}).Size(total) > sh.Total,
			retryFailed && sh.Failed > 0:
			left = append(left, i)
		}
	}
	return left
}
