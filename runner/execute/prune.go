package execute

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// pruning is the pruning policy of a sweep, shared by its attempts.
type pruning struct {
	mu     sync.Mutex
	pruner *schedule.Pruner
	first  float64 // the first rung's step
	// seen says a run reported the metric; noted that the note that no
	// run reports it was sent; names are the other metrics the runs
	// reported until one of the two, which that note lists.
	seen, noted bool
	names       map[string]bool
}

func newPruning(opts Options) (*pruning, error) {
	p, err := schedule.NewPruner(*opts.Prune)
	if err != nil {
		return nil, err
	}
	if _, err := p.UsePrior(opts.PrunePrior); err != nil {
		return nil, err
	}
	p.Resume(opts.Resume)
	return &pruning{pruner: p, first: p.Rungs()[0], names: map[string]bool{}}, nil
}

// judge hands run id's point p of the policy's metric to the pruner:
// Finish once the run has ended, else Judge (keeps: whether the run keeps
// checkpoints, asked by the pruner when it judges the run out).
func (pr *pruning) judge(id string, p metrics.Point, ended bool, keeps func() bool) []run.Judgement {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.seen = true
	if ended {
		return pr.pruner.Finish(id, p.Step, p.Value)
	}
	return pr.pruner.Judge(id, p.Step, p.Value, keeps)
}

// priorNote is what to say once of a judgement after which the pruning
// policy stopped using the prior; "" for none.
func priorNote(j run.Judgement) string {
	if j.PriorDropped == "" {
		return ""
	}
	return "the prune prior is dropped: " + j.PriorDropped + "; the rest of the sweep is judged by its own runs alone"
}

// nextRead is how long until run id's metrics are read again: the
// pruner's NextRead, no sooner than checkpointPoll.
func (pr *pruning) nextRead(id string, pace schedule.Pace, now time.Time, early, interval time.Duration) (time.Duration, time.Duration) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.pruner.NextRead(id, pace, now, early, checkpointPoll, interval)
}

// unreported reports, for a run that ended (mine: it reported the
// metric), whether to send the note that no run has reported the metric
// so far: once.
func (pr *pruning) unreported(mine bool) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	send := !mine && !pr.seen && !pr.noted
	pr.noted = pr.noted || send
	return send
}

// progress tells the scheduler that run k reported step: the density rule
// reads its speed from it, and may decide at once.
func (e *Execution) progress(k schedule.Key, step float64) {
	e.schedMu.Lock()
	e.sched.Progress(k, step, time.Now())
	e.schedMu.Unlock()
	e.signal()
}

// sawOther notes a value of another metric than the policy's: once a run
// reported one past the first rung while no run reported the policy's
// metric, the note that it may be misspelt is sent, once.
func (pr *pruning) sawOther(p metrics.Point, e *Execution) {
	pr.mu.Lock()
	if pr.seen || pr.noted {
		pr.mu.Unlock()
		return
	}
	pr.names[p.Name] = true
	send := p.Step >= pr.first
	pr.noted = send
	var names []string
	if send {
		names = slices.Sorted(maps.Keys(pr.names))
	}
	pr.mu.Unlock()
	if send {
		e.note(fmt.Sprintf("pruning judges runs by %s, which no run has reported by step %v, the first rung (they report %s): a misspelt name? No run is pruned until one reports it",
			pr.pruner.Config().Metric, pr.first, strings.Join(names, ", ")))
	}
}

// The pause and the promotion. A run judged out that keeps checkpoints
// (it reported one, or its checkpoint folder changed) is paused: stopped
// as a pruned run is (after a checkpoint, with Options.CheckpointSignal),
// its attempt ends Paused, and the run waits among the paused ones. When
// the source has no run left and none waits to start (a lane would
// idle), the best paused run that may still win (Pruner.Promote) is
// promoted: a new attempt, which resumes from its checkpoint and is
// judged at its next rung like any run. A run an earlier session paused
// (run.Run.Paused, from the ledger) waits the same way under the same
// policy, and runs as any run without one.

// pausing is the paused runs (schedMu held).
type pausing struct {
	runs     map[string]*job // by run id
	promoted int             // how many were promoted: Summary.Promoted
}

// repause makes r, paused by an earlier session, a candidate for
// promotion (schedMu held); false when this sweep's policy did not pause
// it (none, or another: it runs).
func (e *Execution) repause(r run.Run) bool {
	pr := e.pruning
	if pr == nil {
		return false
	}
	pr.mu.Lock()
	ok := pr.pruner.Repause(r.ID)
	pr.mu.Unlock()
	if ok {
		e.paused.runs[r.ID] = &job{run: r}
	}
	return ok
}

// pause ends j's attempt as paused by judgement at: the scheduler forgets it, and it
// waits among the paused runs (in one step under schedMu, so that the
// loop neither ends the sweep before it waits nor promotes it while it
// holds its place).
func (e *Execution) pause(j *job, at run.Judgement) {
	pr := e.pruning
	e.schedMu.Lock()
	e.sched.Release(j.key)
	delete(e.jobs, j.key)
	pr.mu.Lock()
	pr.pruner.Pause(at)
	pr.mu.Unlock()
	e.paused.runs[j.run.ID] = j
	e.schedMu.Unlock()
	e.signal()
}

// promote hands the scheduler the best paused run that may still win,
// when none waits to start (schedMu held; the source has no run left).
// The loop comes round again at once, for the next lane.
func (e *Execution) promote() {
	pr := e.pruning
	if pr == nil || len(e.paused.runs) == 0 || e.sched.Waiting() > 0 || !e.sched.Room() {
		return
	}
	pr.mu.Lock()
	id, ok := pr.pruner.Promote()
	pr.mu.Unlock()
	j := e.paused.runs[id]
	if !ok || j == nil {
		return
	}
	delete(e.paused.runs, id)
	j.promoted, j.run.Paused = true, false
	e.add(j, nil)
	e.paused.promoted++
	e.signal()
}
