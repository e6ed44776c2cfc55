package execute

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodepack/nodepack/pack/schedule"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
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

// watchMetrics reads the metrics of the attempt ev as it runs (from its
// run directory, open; nil: none), every
// pruning interval, and has the pruning policy judge each new value of its
// metric: each judgement is a Judged event, and a run judged out is
// stopped (st) and ends Pruned. It returns the function to call once the
// attempt's process has exited: it stops the watch and reads what the
// run wrote since the last read, to the end, so that a run that ended
// between two reads still counts at the rungs it reached (recorded, not
// judged out: it ended by itself).
func (e *Execution) watchMetrics(ev run.Event, runDir *os.File, st *runStop) (stop func()) {
	pr := e.pruning
	if pr == nil || runDir == nil {
		return func() {}
	}
	// From the run's directory, following no link (untrusted files).
	dir := untrusted.In(runDir)
	readers := []*metrics.Reader{{Dir: dir, Path: metrics.FileName}}
	if len(pr.patterns) > 0 {
		readers = append(readers, &metrics.Reader{Dir: dir, Path: "stdout.log", Patterns: pr.patterns})
	}
	metric := pr.pruner.Config().Metric
	done, finished := make(chan struct{}), make(chan struct{})
	mine, pruned := false, false // this attempt reported the metric; was judged out
	// read takes the points written since the last read; to the end of an
	// unfinished last line when the run has ended. It reports whether the
	// run was judged out.
	read := func(ended bool) bool {
		var points []metrics.Point
		for _, r := range readers {
			r.Read(ended, func(p metrics.Point) { points = append(points, p) }) // a file it cannot read yet has no points
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
			for _, j := range judged {
				e.emit(run.Event{Kind: run.Judged, Run: ev.Run, Attempt: ev.Attempt, Lane: ev.Lane, Place: ev.Place,
					Stdout: ev.Stdout, Stderr: ev.Stderr, Start: time.Now(), Judgement: &j})
				if j.Stop {
					e.stopRun(st, run.Pruned)
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
	go func() {
		defer close(finished)
		t := time.NewTicker(pr.interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if read(false) {
				pruned = true
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		if !pruned {
			read(true)
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
