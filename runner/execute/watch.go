package execute

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// DefaultPruneInterval is how often a running attempt's metrics are read
// for pruning when Options.PruneInterval is zero.
const DefaultPruneInterval = time.Second

// metricsWatch reads the metrics of one running attempt (from its run
// directory, following no link: a run's files are untrusted), every
// pruning interval, and reports what it reads: each value of the pruning
// policy's metric to the pruner, which judges it (a run judged out is
// stopped through its runStop, and ends Pruned, or Paused when the
// pruner says so); the furthest step to the scheduler's density rule (a
// gpus=auto run); the checkpoints to the attempt's checkpoint watch,
// which a stop waits for. When to read next is the pruner's
// (NextRead). It decides nothing itself.
type metricsWatch struct {
	port     watchPort
	ev       run.Event    // the attempt's Started event
	key      schedule.Key // its run's, for the density rule
	dir      *os.File     // its run directory, open
	readers  []*metrics.Reader
	ckpt     *checkpoints
	stop     *runStop
	auto     bool   // a gpus=auto run: its steps go to the density rule
	asks     bool   // a stop waits for the checkpoint it asks for
	metric   string // the pruning policy's; "" without one
	interval time.Duration

	mine      bool           // this attempt reported the metric
	judgedOut bool           // it was judged out: no more judgements
	paused    *run.Judgement // the judgement that paused it
	furthest  float64        // the furthest step it reported

	done, finished chan struct{}
}

// watchMetrics starts the watch of attempt a, when something needs it (a
// pruning policy, a gpus=auto run, a checkpoint signal) and the attempt
// has a run directory; nil otherwise.
func (e *Execution) watchMetrics(a *attempt) *metricsWatch {
	asks := e.opts.CheckpointSignal != 0
	auto := e.opts.RequestOf(a.spec.run).AutoShare
	if e.pruning == nil && !auto && !asks || a.files.dir == nil {
		return nil
	}
	dir := untrusted.In(a.files.dir)
	w := &metricsWatch{port: sweepPort{e}, ev: a.ev, key: a.spec.key, dir: a.files.dir, ckpt: a.ckpt, stop: a.stop, auto: auto, asks: asks,
		interval: e.opts.readInterval(), furthest: math.Inf(-1),
		readers: []*metrics.Reader{{Dir: dir, Path: metrics.FileName}},
		done:    make(chan struct{}), finished: make(chan struct{})}
	if len(e.opts.Metrics) > 0 {
		w.readers = append(w.readers, &metrics.Reader{Dir: dir, Path: "stdout.log", Patterns: e.opts.Metrics})
	}
	if e.pruning != nil {
		w.metric = e.pruning.pruner.Config().Metric
	}
	w.ckpt.watch()
	go w.loop()
	return w
}

// readInterval is how often a running attempt's metrics are read:
// PruneInterval, else DefaultPruneInterval.
func (p *Policy) readInterval() time.Duration {
	if p.PruneInterval <= 0 {
		return DefaultPruneInterval
	}
	return p.PruneInterval
}

// read takes the points written since the last read (to the end of an
// unfinished last line once the run has ended) and reports them; it
// reports whether the run was judged out by them.
func (w *metricsWatch) read(ended bool) bool {
	var points []metrics.Point
	top := w.furthest
	for _, r := range w.readers {
		r.Read(ended, func(p metrics.Point) { points = append(points, p) }) // a file it cannot read yet has no points
		if step, ok := r.LastStep(); ok {
			top = max(top, step)
		}
	}
	for _, p := range points {
		if p.Name == metrics.CheckpointKey {
			w.ckpt.sawLine(p.Value)
		}
	}
	if w.asks || w.metric != "" { // a pause needs the run's checkpoints too
		w.ckpt.look(w.dir, w.furthest, ended) // the step read by the last look: the change came after it
	}
	if top > w.furthest && !ended {
		w.furthest = top
		if w.auto {
			w.port.Progress(w.key, top)
		}
	}
	if w.metric == "" || w.judgedOut {
		return false // judged out: no more judgements; the checkpoint its stop waits for still counts
	}
	return w.judge(points, ended)
}

// judge hands the points of the policy's metric to the pruner, emits each
// judgement, and stops the run one judges out; the other metrics' points
// go to the note about a misspelt metric.
func (w *metricsWatch) judge(points []metrics.Point, ended bool) bool {
	// The metric's points first: a line that reports it beside others
	// must not make the others look like its misspelling.
	for _, p := range points {
		if p.Name != w.metric {
			continue
		}
		w.mine = true
		for _, jd := range w.port.Judge(w.ev.Run.ID, p, ended, func() bool { return w.ckpt.keeps(w.asks) }) {
			if note := priorNote(jd); note != "" {
				w.port.Note(note)
			}
			w.port.Emit(run.Event{Kind: run.Judged, Run: w.ev.Run, Attempt: w.ev.Attempt, Lane: w.ev.Lane, Place: w.ev.Place,
				Stdout: w.ev.Stdout, Stderr: w.ev.Stderr, Start: time.Now(), Judgement: &jd})
			if jd.Stop {
				// Stopped while the watch reads on: a checkpoint
				// signal's stop waits for the checkpoint it reads.
				reason := run.Pruned
				if jd.Pause {
					reason, w.paused = run.Paused, &jd
				}
				go w.port.Stop(w.stop, reason)
				return true
			}
		}
	}
	for _, p := range points {
		if p.Name != w.metric {
			w.port.SawOther(p)
		}
	}
	return false
}

// loop reads until the attempt ends: at the pace the pruner asks for, or
// every checkpointPoll while a stop waits for a checkpoint.
func (w *metricsWatch) loop() {
	defer close(w.finished)
	defer w.ckpt.unwatch()
	early := w.interval
	if w.metric != "" {
		early = min(w.interval, schedule.FirstRead) // the run's pace, early
	}
	t := time.NewTicker(early)
	defer t.Stop()
	hurried := false
	pace := schedule.Pace{Step: math.Inf(-1)} // no step yet
	for {
		select {
		case <-w.done:
			return
		case <-w.ckpt.hurry:
			hurried = true
			t.Reset(checkpointPoll) // a stop waits for its checkpoint
		case <-t.C:
		}
		out := w.read(false)
		w.ckpt.didRead()
		if w.judgedOut || out {
			// Judged out: its stop waits for the checkpoint a checkpoint
			// signal asks for, which only a read sees.
			w.judgedOut = true
			if !w.asks {
				return
			}
			t.Reset(checkpointPoll)
			continue
		}
		if w.metric != "" && !hurried {
			now := time.Now()
			pace = pace.Saw(now, w.furthest)
			var wait time.Duration
			wait, early = w.port.NextRead(w.ev.Run.ID, pace, now, early, w.interval)
			t.Reset(wait)
		}
	}
}

// end is called once the attempt's process has exited: it stops the
// watch and reads what the run wrote since the last read, to the end, so
// that a run that ended between two reads still counts at the rungs it
// reached (recorded, not judged out: it ended by itself). It returns the
// judgement that paused the run, if one did.
func (w *metricsWatch) end() *run.Judgement {
	if w == nil {
		return nil
	}
	close(w.done)
	<-w.finished
	w.read(true) // to the end: its last steps and checkpoint (judged out, no judgement)
	w.port.Ended(w.ev.Run.Origin, w.auto && math.IsInf(w.furthest, -1), w.metric != "" && !w.mine)
	return w.paused
}

// watchPort is all a metrics watch sees of the sweep: it reports facts (a
// value of the pruning policy's metric, another metric's, the furthest
// step, how the run's reports ended) and asks the pruning policy (which
// judges the values and times the reads); it carries out what comes
// back: a judgement's event, and the stop of a run judged out.
type watchPort interface {
	Judge(id string, p metrics.Point, ended bool, keeps func() bool) []run.Judgement
	NextRead(id string, pace schedule.Pace, now time.Time, early, interval time.Duration) (wait, nextEarly time.Duration)
	SawOther(p metrics.Point)
	Note(line string)
	Progress(k schedule.Key, step float64)
	Emit(ev run.Event)
	Stop(st *runStop, reason run.Reason)
	// Ended says the run ended: without a step (noSteps, a gpus=auto run)
	// or without the policy's metric (noMetric).
	Ended(origin string, noSteps, noMetric bool)
}

// sweepPort is the Execution as a watch's port.
type sweepPort struct{ e *Execution }

func (s sweepPort) Judge(id string, p metrics.Point, ended bool, keeps func() bool) []run.Judgement {
	return s.e.pruning.judge(id, p, ended, keeps)
}

func (s sweepPort) NextRead(id string, pace schedule.Pace, now time.Time, early, interval time.Duration) (time.Duration, time.Duration) {
	return s.e.pruning.nextRead(id, pace, now, early, interval)
}

func (s sweepPort) SawOther(p metrics.Point)              { s.e.pruning.sawOther(p, s.e) }
func (s sweepPort) Note(line string)                      { s.e.note(line) }
func (s sweepPort) Progress(k schedule.Key, step float64) { s.e.progress(k, step) }
func (s sweepPort) Emit(ev run.Event)                     { s.e.emit(ev) }
func (s sweepPort) Stop(st *runStop, reason run.Reason)   { s.e.stopRun(st, reason) }

// Ended says, once each, that a gpus=auto run reported no step and that
// no run has reported the pruning policy's metric so far.
func (s sweepPort) Ended(origin string, noSteps, noMetric bool) {
	e := s.e
	if noSteps && e.noted.auto.CompareAndSwap(false, true) {
		e.note(fmt.Sprintf("%s ended without reporting a step to $NODEPACK_METRICS (or a --metric pattern): --runs-per-gpu auto measures the runs by their steps, so a shape whose runs report none keeps one run per GPU",
			origin))
	}
	if e.pruning != nil && e.pruning.unreported(!noMetric) {
		metric := e.pruning.pruner.Config().Metric
		e.note(fmt.Sprintf("%s ended without reporting %s, and no run has reported it so far: a run that reports no %s is never pruned (a misspelt name?)",
			origin, metric, metric))
	}
}
