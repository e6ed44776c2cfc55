package execute

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// DefaultPruneInterval is how often a running attempt's metrics are read
// for pruning when Options.PruneInterval is zero.
const DefaultPruneInterval = time.Second

// pruning is the pruning policy of a sweep, shared by its attempts.
type pruning struct {
	mu       sync.Mutex
	pruner   *schedule.Pruner
	first    float64 // the first rung's step
	interval time.Duration
	patterns []metrics.Pattern
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
	for _, j := range opts.Judgements {
		p.Replay(j)
	}
	interval := opts.PruneInterval
	if interval <= 0 {
		interval = DefaultPruneInterval
	}
	return &pruning{pruner: p, first: p.Rungs()[0], interval: interval, patterns: opts.Metrics, names: map[string]bool{}}, nil
}

// watchMetrics reads the metrics of the attempt ev of j as it runs (from
// its run directory, open; nil: none), every pruning interval, for the
// pruning policy, for the density rule (a gpus=auto run) and for the
// checkpoints a stop waits for (ckpt, with Options.CheckpointSignal;
// a checkpoint folder that changed counts too): each new
// value of the policy's metric is judged at the rungs it reaches, each
// judgement is a Judged event, and a run judged out is stopped (st) and
// ends Pruned, or Paused when it keeps checkpoints (the watch reads on
// until it has stopped, for the checkpoint its stop waits for); the
// furthest step the run reported goes to the scheduler
// as its progress. It returns the function to call once the attempt's
// process has exited: it stops the watch and reads what the run wrote
// since the last read, to the end, so that a run that ended between two
// reads still counts at the rungs it reached (recorded, not judged out:
// it ended by itself).
func (e *Execution) watchMetrics(j *job, ev run.Event, runDir *os.File, st *runStop, ckpt *checkpoints) (stop func()) {
	pr := e.pruning
	auto := e.opts.RequestOf(j.run).AutoShare
	asks := e.opts.CheckpointSignal != 0 // a stop waits for the checkpoint it asks for
	looks := asks || pr != nil           // a pause needs the run's checkpoints
	if pr == nil && !auto && !asks || runDir == nil {
		return func() {}
	}
	// From the run's directory, following no link (untrusted files).
	dir := untrusted.In(runDir)
	readers := []*metrics.Reader{{Dir: dir, Path: metrics.FileName}}
	if len(e.opts.Metrics) > 0 {
		readers = append(readers, &metrics.Reader{Dir: dir, Path: "stdout.log", Patterns: e.opts.Metrics})
	}
	interval, metric := e.opts.PruneInterval, ""
	if interval <= 0 {
		interval = DefaultPruneInterval
	}
	if pr != nil {
		metric = pr.pruner.Config().Metric
	}
	done, finished := make(chan struct{}), make(chan struct{})
	mine, pruned := false, false // this attempt reported the metric; was judged out
	furthest := math.Inf(-1)     // the furthest step it reported
	// read takes the points written since the last read; to the end of an
	// unfinished last line when the run has ended. It reports whether the
	// run was judged out.
	read := func(ended bool) bool {
		var points []metrics.Point
		for _, r := range readers {
			r.Read(ended, func(p metrics.Point) { points = append(points, p) }) // a file it cannot read yet has no points
		}
		top := furthest
		for _, r := range readers {
			if step, ok := r.LastStep(); ok {
				top = max(top, step)
			}
		}
		for _, p := range points {
			if p.Name == metrics.CheckpointKey {
				ckpt.sawLine(p.Value)
			}
		}
		if looks {
			ckpt.look(runDir, top)
		}
		if top > furthest && !ended {
			furthest = top
			if auto {
				e.progress(j, top)
			}
		}
		if pr == nil || pruned {
			return false // judged out: no more judgements, the checkpoint its stop waits for still counts
		}
		// The metric's points first: a line that reports it beside others
		// must not make the others look like its misspelling.
		for _, p := range points {
			if p.Name != metric {
				continue
			}
			pr.mu.Lock()
			pr.seen, mine = true, true
			var judged []run.Judgement
			if ended {
				judged = pr.pruner.Finish(ev.Run.ID, p.Step, p.Value)
			} else {
				judged = pr.pruner.Judge(ev.Run.ID, p.Step, p.Value)
			}
			pr.mu.Unlock()
			for _, jd := range judged {
				// Judged out, a run that keeps checkpoints is paused: it
				// may be promoted later, from its checkpoint.
				jd.Pause = jd.Stop && ckpt.keeps(asks)
				e.emit(run.Event{Kind: run.Judged, Run: ev.Run, Attempt: ev.Attempt, Lane: ev.Lane, Place: ev.Place,
					Stdout: ev.Stdout, Stderr: ev.Stderr, Start: time.Now(), Judgement: &jd})
				if jd.Stop {
					// Stopped while the watch reads on: a checkpoint
					// signal's stop waits for the checkpoint it reads.
					reason := run.Pruned
					if jd.Pause {
						reason, j.pausedAt = run.Paused, &jd
					}
					go e.stopRun(st, reason)
					return true
				}
			}
		}
		for _, p := range points {
			if p.Name != metric {
				pr.sawOther(p, e)
			}
		}
		return false
	}
	ckpt.watch()
	go func() {
		defer close(finished)
		defer ckpt.unwatch()
		first := interval
		if pr != nil {
			first = min(interval, firstPruneRead) // the run's pace, early
		}
		t := time.NewTicker(first)
		defer t.Stop()
		hurried, early := false, first
		was := mark{t: time.Now()} // the furthest step at the read before: none at the start
		for {
			select {
			case <-done:
				return
			case <-ckpt.hurry:
				hurried = true
				t.Reset(checkpointPoll) // a stop waits for its checkpoint
			case <-t.C:
			}
			out := read(false)
			ckpt.didRead()
			if pruned || out {
				// Judged out: its stop waits for the checkpoint a
				// checkpoint signal asks for, which only a read sees.
				pruned = true
				if !asks {
					return
				}
				t.Reset(checkpointPoll)
				continue
			}
			if pr != nil && !hurried {
				// The next read when the run reaches its next rung, by its
				// pace so far: judged as its value comes, not up to an
				// interval of steps later.
				// Until its pace is known (a run that takes a while to
				// start), the reads come twice as far apart each time,
				// from firstPruneRead up to the interval.
				now := mark{time.Now(), furthest}
				wait, known := rungWait(pr, ev.Run.ID, was, now, interval)
				if !known {
					early = min(2*early, interval)
					wait = early
				}
				t.Reset(wait)
				if !math.IsInf(furthest, -1) {
					was = now
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		read(true) // to the end: its last steps and checkpoint (judged out, no judgement)
		if auto && math.IsInf(furthest, -1) && e.noted.auto.CompareAndSwap(false, true) {
			e.note(fmt.Sprintf("%s ended without reporting a step to $NODEPACK_METRICS (or a --metric pattern): --runs-per-gpu auto measures the runs by their steps, so a shape whose runs report none keeps one run per GPU",
				ev.Run.Origin))
		}
		if pr == nil {
			return
		}
		pr.mu.Lock()
		send := !mine && !pr.seen && !pr.noted
		pr.noted = pr.noted || send
		pr.mu.Unlock()
		if send {
			e.note(fmt.Sprintf("%s ended without reporting %s, and no run has reported it so far: a run that reports no %s is never pruned (a misspelt name?)",
				ev.Run.Origin, metric, metric))
		}
	}
}

// firstPruneRead is when a pruned run's metrics are first read: its pace
// from then on times the reads to its rungs.
const firstPruneRead = 100 * time.Millisecond

// mark is a run's furthest step when it was read.
type mark struct {
	t    time.Time
	step float64
}

// rungWait is how long until run id reaches its next rung, at the pace it
// went from was to now; at least checkpointPoll, at most interval (also
// after its last rung). known is false when the pace is not known yet (no
// step, or none since the read before).
func rungWait(pr *pruning, id string, was, now mark, interval time.Duration) (wait time.Duration, known bool) {
	pr.mu.Lock()
	next, ok := pr.pruner.NextRung(id)
	pr.mu.Unlock()
	if !ok {
		return interval, true
	}
	dt, ds := now.t.Sub(was.t), now.step-was.step
	if dt <= 0 || ds <= 0 || math.IsInf(now.step, 0) || math.IsInf(was.step, 0) {
		return interval, false
	}
	wait = time.Duration(float64(dt) * max(next-now.step, 0) / ds)
	return min(max(wait, checkpointPoll), interval), true
}

// progress tells the scheduler that j reported step: the density rule
// reads its speed from it, and may decide at once.
func (e *Execution) progress(j *job, step float64) {
	e.schedMu.Lock()
	e.sched.Progress(j.key, step, time.Now())
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

// pause ends j's attempt as paused: the scheduler forgets it, and it
// waits among the paused runs (in one step under schedMu, so that the
// loop neither ends the sweep before it waits nor promotes it while it
// holds its place).
func (e *Execution) pause(j *job) {
	pr := e.pruning
	e.schedMu.Lock()
	e.sched.Release(j.key)
	delete(e.jobs, j.key)
	pr.mu.Lock()
	pr.pruner.Pause(*j.pausedAt)
	pr.mu.Unlock()
	j.pausedAt = nil
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
