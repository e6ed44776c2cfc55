package runner

import (
	"context"
	"iter"

	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// liveRuns is a run source that makes the session's runs as it goes, in
// place of the sweep's fixed runs: a pool task's claims (poolRuns), or a
// searcher's proposals (searchRuns). The session hands the runner its
// runs, passes it the sweep's events, asks it what a rerun would run, and
// closes it at its end (or when the runner did not start).
type liveRuns interface {
	// runs are the runs to run, and resumed what was done with the runs
	// the ledger knew (read once the runs are done).
	runs() iter.Seq2[run.Run, error]
	resumed() ledger.ResumeCounts
	// event is each event of the sweep as it comes; recorded each once
	// its record is durable in the ledger.
	event(ev run.Event)
	recorded(ev run.Event)
	// started says the runner is going.
	started(x *execute.Execution)
	// left counts the runs a rerun would run.
	left() int
	close()
}

// openLive opens the session's live run source, where the sweep has one
// (a pool task, a searcher), and sets how the runner takes runs from it
// in xo; nil for a sweep of fixed runs.
func (s *Sweep) openLive(ctx context.Context, xo *execute.Options) (liveRuns, error) {
	lanes := max(s.opts.Plan.Parallel, len(s.opts.Plan.Slots), xo.Parallel, 1)
	switch {
	case s.pool != "":
		p, err := s.openPool(lanes)
		if err != nil {
			return nil, err
		}
		// Runs claimed wait in the claim, not in the task's queue, where
		// a task whose lanes are busy would hold them while others idle:
		// one run ahead, or a lane's worth where runs ask for different
		// things and smaller ones may backfill.
		xo.Window, xo.Fenced, xo.Guard = 1, p.fenced, p.guard
		if s.mixed {
			xo.Window = lanes
		}
		return p, nil
	case s.def.Kind == sweep.KindSearch:
		// One proposal ahead of the lanes (and one the feeder holds): the
		// searcher is asked as late as keeps the node full, so that it
		// proposes knowing as many ends as it can.
		sr, err := s.openSearch(ctx, lanes)
		if err != nil {
			return nil, err
		}
		xo.Window = 1
		return sr, nil
	}
	return nil, nil
}

func (p *poolRuns) resumed() ledger.ResumeCounts { return p.counts() }

// recorded: a pool task follows its events as they come (event).
func (p *poolRuns) recorded(run.Event) {}

// started gives the fence the runner's and starts the heartbeat.
func (p *poolRuns) started(x *execute.Execution) {
	p.mu.Lock()
	p.fence = x.Fence
	p.mu.Unlock()
	go p.heartbeat()
}

func (sr *searchRuns) resumed() ledger.ResumeCounts { return sr.counts() }

// event: the searcher is told ends once they are durable (recorded).
func (sr *searchRuns) event(run.Event) {}

func (sr *searchRuns) started(*execute.Execution) {}
