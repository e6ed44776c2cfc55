package submit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
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
	Shards      []ShardView `json:"shards"` // by shard index; a pool's tasks, in the order of their submissions
	// Pool says the submissions are tasks of one shared pool.
	Pool bool `json:"pool,omitempty"`
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
	// Log is the task's log in the output directory (jobs/…), for a task
	// not started that has one; "" where it has none (it never ran).
	Log string `json:"log,omitempty"`
}

// Look asks the scheduler about recs' jobs and joins what it says with
// the shards' ledgers (from results.ReadStatus) into a View. The queue is
// asked once; queue, when not nil, replaces asking it (for tests).
func Look(ctx context.Context, recs []Record, shards []results.ShardStatus, queue func(context.Context, Scheduler, []string) ([]Task, error)) View {
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
	if recs[len(recs)-1].Job.Pool {
		v.Pool = true
		return v.lookPool(recs, shards, queued)
	}
	ledgers := map[int]results.ShardStatus{}
	count := recs[len(recs)-1].Job.Shards
	for _, sh := range shards {
		if sh.State != results.ShardOtherSweep && max(sh.Count, 1) == count {
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
			v.setState(&sv, t, inQueue, newest[s] != i, sh, hasLedger)
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

// setState sets sv's state: the queue's (t, when inQueue), superseded by
// a later submission, or as its ledger sh (when hasLedger) left it.
func (v View) setState(sv *ShardView, t Task, inQueue, superseded bool, sh results.ShardStatus, hasLedger bool) {
	switch {
	case inQueue:
		sv.State, sv.Node = t.State, t.Node
	case superseded:
		sv.State = TaskSuperseded
	case hasLedger && sh.State == results.ShardEnded && (v.Error == "" || sh.Deferred == 0):
		// Ended, and not to be requeued when the queue is not known.
		sv.State, sv.Note = TaskEnded, sh.Note
	case v.Error != "":
		sv.State = TaskUnknown
	case !hasLedger:
		sv.State = TaskNotStarted
	default:
		sv.State, sv.Node = TaskDied, sh.Host
	}
}

// lookPool is Look for a pool's submissions: every task of every
// submission, its ledger found by its name in the pool (the job's id and
// the array task's, as nodepack run --pool auto names it); ShardView.Shard
// numbers the tasks across the submissions.
func (v View) lookPool(recs []Record, shards []results.ShardStatus, queued map[string]map[int]Task) View {
	ledgers := map[string]results.ShardStatus{}
	for _, sh := range shards {
		if sh.State != results.ShardOtherSweep && sh.Pool != "" {
			ledgers[sh.Pool] = sh
		}
	}
	n := 0
	for _, r := range recs {
		jv := JobView{JobID: r.JobID, Submitted: r.Time, Shards: spans(r.Job.tasks()), Tasks: map[string]int{}}
		for k := range r.Job.tasks() {
			task := r.Job.taskID(k)
			sv := ShardView{Shard: n, JobID: r.JobID, Task: task, Left: -1}
			n++
			sh, hasLedger := ledgers[PoolTask(r.JobID, task)]
			if hasLedger {
				sv.Left = sh.Left
			}
			t, inQueue := queued[r.JobID][task]
			v.setState(&sv, t, inQueue, false, sh, hasLedger)
			jv.Tasks[sv.State]++
			v.Shards = append(v.Shards, sv)
		}
		v.Submissions = append(v.Submissions, jv)
	}
	return v
}

// PoolTask is the name nodepack run --pool auto gives array task task of
// job (see batch.Label): the name of its ledger in the pool.
func PoolTask(job string, task int) string { return job + "_" + strconv.Itoa(task) }

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
// results.ReadStatus): a shard without a ledger, one with runs pending,
// running or interrupted (one whose total is not known: without an end
// record, or with runs deferred), one with more runs now than its ledger
// knew (the source grew), and, with retryFailed, one with failed runs.
func Left(count, total int, shards []results.ShardStatus, retryFailed bool) []int {
	byIndex := map[int]results.ShardStatus{}
	for _, sh := range shards {
		if sh.State != results.ShardOtherSweep && max(sh.Count, 1) == count {
			byIndex[sh.Index] = sh
		}
	}
	var left []int
	for i := range count {
		sh, ok := byIndex[i]
		switch {
		case !ok,
			sh.Left > 0,
			sh.Left < 0 && (sh.State != results.ShardEnded || sh.Deferred > 0),
			sh.Total >= 0 && (sweep.Shard{Index: i, Count: count}).Size(total) > sh.Total,
			retryFailed && sh.Failed > 0:
			left = append(left, i)
		}
	}
	return left
}

// Status is where the sweep in dir stands: its ledgers' status and, for a
// sweep started with Submit, the scheduler's view of its array tasks (nil
// otherwise), joined: the shards whose task has not started yet count
// their runs as pending, so that the counts cover the whole sweep. It is
// what nodepack status, submit --wait and resubmit read.
func Status(ctx context.Context, dir string) (*Doc, error) {
	recs, err := Read(dir)
	if err != nil {
		return nil, err
	}
	st, err := results.ReadStatus(dir, time.Now())
	if errors.Is(err, ledger.ErrNoLedger) && len(recs) > 0 {
		st, err = results.NewStatus(dir, time.Now()), nil
	}
	if err != nil {
		return nil, err
	}
	doc := &Doc{Status: st}
	if len(recs) > 0 {
		v := Look(ctx, recs, st.Shards, nil)
		var logs map[string]bool // the regular files in jobs/, read once, where a task has not started
		for i, sh := range v.Shards {
			if sh.State != TaskNotStarted {
				continue
			}
			if logs == nil {
				logs = jobLogs(dir)
			}
			v.Shards[i].Log = taskLog(logs, v.Scheduler, sh.JobID, sh.Task)
		}
		addUnstarted(st, recs[len(recs)-1])
		doc.Scheduler = &v
	}
	return doc, nil
}

// Doc is Status's document, nodepack status --json's: the ledgers'
// nodepack.status/v1 document and, for a submitted sweep, the scheduler's
// view.
type Doc struct {
	*results.Status
	Scheduler *View `json:"scheduler,omitempty"`
}

// addUnstarted counts the runs of the shards that have no ledger yet (their
// task has not started) as pending, so that the counts cover the whole
// sweep rec submitted.
func addUnstarted(st *results.Status, rec Record) {
	if st.Total == nil || rec.Runs <= 0 {
		return
	}
	if rec.Job.Pool {
		// The pool's tasks each know the whole sweep's total: until one
		// has started, it is the submission's.
		for _, sh := range st.Shards {
			if sh.State != results.ShardOtherSweep && sh.Pool != "" {
				return
			}
		}
		*st.Total += rec.Runs
		st.Counts.Pending += rec.Runs
		return
	}
	started := map[int]bool{}
	for _, sh := range st.Shards {
		if sh.State != results.ShardOtherSweep && sh.Count == rec.Job.Shards {
			started[sh.Index] = true
		}
	}
	for i := range rec.Job.Shards {
		if !started[i] {
			n := sweep.Shard{Index: i, Count: rec.Job.Shards}.Size(rec.Runs)
			*st.Total += n
			st.Counts.Pending += n
		}
	}
}

// jobLogs lists the regular files in dir's jobs/ (not following links):
// the logs the array's tasks left.
func jobLogs(dir string) map[string]bool {
	logs := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(dir, "jobs"))
	for _, e := range entries {
		if e.Type().IsRegular() {
			logs[e.Name()] = true
		}
	}
	return logs
}

// taskLog is the log an array task of job left, of logs (jobLogs), by the
// name its script asks the scheduler for (jobs/slurm-JOB_TASK.log,
// jobs/sge-JOB.TASK.log; PBS names its own, by the job's number and the
// task's index), relative to the output directory; "" when there is none:
// the task never ran.
func taskLog(logs map[string]bool, s Scheduler, job string, task int) string {
	switch s {
	case Slurm:
		if name := fmt.Sprintf("slurm-%s_%d.log", job, task); logs[name] {
			return filepath.Join("jobs", name)
		}
	case SGE:
		if name := fmt.Sprintf("sge-%s.%d.log", job, task); logs[name] {
			return filepath.Join("jobs", name)
		}
	case PBS:
		seq, _, _ := strings.Cut(job, ".")
		seq = strings.TrimSuffix(seq, "[]")
		for _, name := range slices.Sorted(maps.Keys(logs)) {
			if strings.Contains(name, seq+"["+strconv.Itoa(task)+"]") || strings.Contains(name, ".o"+seq+"."+strconv.Itoa(task)) {
				return filepath.Join("jobs", name)
			}
		}
	}
	return ""
}
