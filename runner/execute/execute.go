package execute

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// waitDelay bounds how long Wait keeps reading a run's output pipes (Live
// mode only) after the run ended, in case an escaped descendant still holds
// them; the sweeper normally kills such a holder well before. A variable
// for the test that holds that it does.
var waitDelay = 2 * time.Second

// ErrKilled is what Wait returns (wrapped) when Kill stopped the sweep.
var ErrKilled = errors.New("killed")

// Execute runs every run from runs and returns when the source is
// exhausted and all started runs have ended, or after it stopped early: it
// is [Start] followed by [Execution.Wait].
func Execute(ctx context.Context, runs iter.Seq2[run.Run, error], opts Options) (Summary, error) {
	x, err := Start(ctx, runs, opts)
	if err != nil {
		return Summary{}, err
	}
	return x.Wait()
}

// Execution is a sweep started by [Start]. Its runs go on in the background
// until the source is exhausted and the started runs have ended, or until
// it is stopped: by cancelling the context Start was given (stop every run:
// SIGTERM, then SIGKILL after Options.Grace), by [Execution.Kill] (SIGKILL
// at once), by [Execution.Drain] (start nothing more, let running runs
// end), or by the deadlines of [Execution.SetDeadlines].
//
// Its methods may be called from any goroutine, concurrently, and also
// after Wait has returned, when they do nothing.
type Execution struct {
	ctx          context.Context
	opts         Options
	grace        time.Duration     // opts.GracePeriod()
	patterns     []failure.Pattern // Options.FailPatterns, then failure.Builtin
	env          *envBuilder
	live         *liveWriter
	dirs         workDirs
	cgroups      *proc.Cgroups // EnforceMem's cgroups; nil when it samples or is off
	pruning      *pruning      // Prune's state; nil without
	mps          mpsDaemon     // the sweep's MPS control daemon, once a run shares a GPU
	paths        pathCache
	noted        notes
	life         *life
	stopOnCancel func() bool
	next         chan run.Run // runs handed from the source to the scheduler
	workers      sync.WaitGroup
	procs        proc.Set     // the attempts whose process runs, for watchStops
	byRun        runStops     // the same by run, for Fence
	running      atomic.Int64 // attempts whose process runs
	eventMu      sync.Mutex   // serialises OnEvent
	tally        tally

	// schedMu guards the policy (see package schedule), the runs it knows,
	// the paused ones and each lane's TMPDIR; wake wakes the loop that
	// carries it out.
	schedMu sync.Mutex
	sched   *schedule.Scheduler
	jobs    map[schedule.Key]*job
	paused  pausing // the paused runs, for promotion (Options.Prune): Summary.Paused at the end
	wake    chan struct{}
}

// notes are the notes said once per sweep.
type notes struct {
	blind sync.Once   // that GPU memory cannot be read
	auto  atomic.Bool // that a gpus=auto run reported no step
}

// tally is what Wait returns, as the attempts end: the Summary and the
// first error, under its own lock.
type tally struct {
	mu      sync.Mutex // guards sum and err
	sum     Summary
	err     error        // first source or setup error
	outside atomic.Int64 // attempts ended by a stop signal the runner did not send (StopSignal)

	once   sync.Once // Wait's
	result Summary
	resErr error
}

// Start checks its arguments, sets up the output directory and starts the
// sweep: each run takes what its request asks for from the Topology when
// it starts and gives it back when it ends, and the next runs that fit
// start at once, up to Parallel at a time. Runs start in the order the
// source yields them, except that a run may start ahead of one that does
// not fit yet, for at most BackfillWait (see pack.Queue).
//
// A run's exit status is data, not an error: failures are counted in the
// Summary and reported through OnEvent. Start returns an error only when
// the sweep cannot begin (bad options, a Request that can never fit, an
// unwritable OutputDir); a run further down the source whose own request
// can never fit ends the sweep as a source error does. See the package
// documentation for its process-wide effects.
func Start(ctx context.Context, runs iter.Seq2[run.Run, error], opts Options) (*Execution, error) {
	e, err := newExecution(ctx, opts)
	if err != nil {
		return nil, err
	}
	e.stopOnCancel = context.AfterFunc(ctx, e.halt)
	go e.feed(runs)
	go e.watchStops()
	if opts.GPUFaults != nil {
		go e.watchFaults(opts.GPUFaults)
	}
	e.workers.Go(e.schedule)
	return e, nil
}

// Wait waits for the sweep to end and returns its summary, valid in every
// case, and an error when
//   - the context was cancelled: new runs stopped, every running process
//     group got SIGTERM and, after Grace, SIGKILL; the error wraps
//     context.Cause(ctx);
//   - Kill was called: the same, but SIGKILL at once; the error wraps
//     [ErrKilled];
//   - runs yielded an error: that ended the stream, the runs read before it
//     still ran, and the error is returned as is;
//   - a run could not be set up (its log files, its CPUs): running runs
//     finished first.
//
// A drain or a terminate deadline is no error: Summary.Drained says so.
// Wait may be called more than once; every call returns the same.
func (e *Execution) Wait() (Summary, error) {
	e.tally.once.Do(func() {
		e.workers.Wait()
		e.halt() // releases the feeder if it is still waiting to hand over a run
		e.life.end()
		e.stopOnCancel()
		// Before the sweep for what runs left: the daemon is nodepack's. A
		// stopped sweep waits for its quit no longer than its grace.
		quitWait := mpsStartTimeout
		switch {
		case e.killed():
			quitWait = 0
		case e.ctx.Err() != nil:
			quitWait = min(quitWait, e.grace)
		}
		e.mps.stop(quitWait)
		proc.SweepAll()
		e.dirs.close()
		if e.cgroups != nil {
			e.cgroups.Close()
		}
		e.tally.mu.Lock()
		defer e.tally.mu.Unlock()
		e.tally.sum.End = time.Now()
		e.tally.sum.OutsideStops = int(e.tally.outside.Load())
		e.schedMu.Lock()
		for len(e.tally.sum.LaneBusy) < e.sched.Lanes() {
			e.tally.sum.LaneBusy = append(e.tally.sum.LaneBusy, 0)
		}
		e.tally.sum.Paused, e.tally.sum.Promoted = len(e.paused.runs), e.paused.promoted
		if pr := e.pruning; pr != nil {
			pr.mu.Lock()
			e.tally.sum.Forecasts, e.tally.sum.Prior = pr.pruner.Coverage(), pr.pruner.Prior()
			pr.mu.Unlock()
		}
		for _, j := range e.paused.runs {
			if j.attempts == 0 {
				// Paused by an earlier session and never promoted by this
				// one: a run of this sweep all the same, so that the
				// summary's parts add up to its runs.
				e.tally.sum.Runs++
			}
		}
		e.schedMu.Unlock()
		e.tally.result, e.tally.resErr = e.tally.sum, e.tally.err
		switch {
		case e.ctx.Err() != nil:
			e.tally.resErr = fmt.Errorf("execute: interrupted: %w", context.Cause(e.ctx))
		case e.killed():
			e.tally.resErr = fmt.Errorf("execute: %w", ErrKilled)
		}
	})
	return e.tally.result, e.tally.resErr
}

// Running returns how many runs' processes are running now. It is exact at
// any moment, unlike a count kept from events, which a caller's OnEvent
// may get late.
func (e *Execution) Running() int { return int(e.running.Load()) }

// Drain stops the starting of runs and retries; running runs go on to
// their end. Summary.Drained reports it.
func (e *Execution) Drain() { e.drain() }

// Kill stops the starting of runs and sends SIGKILL to every running
// process group at once: the escalation for a second Ctrl-C.
func (e *Execution) Kill() {
	e.life.killNow()
	e.halt()
}

// Fence stops the running attempts of the runs for which lost returns
// true, as a cancellation stops a run (a checkpoint first, SIGTERM, then
// SIGKILL after Grace): they end Interrupted, for their new owner to run.
// The sweep goes on; Options.Fenced keeps their next attempts from
// starting.
func (e *Execution) Fence(lost func(id string) bool) {
	for _, st := range e.byRun.matching(lost) {
		e.stopRun(st, run.Interrupted)
	}
}

// SetDeadlines sets when the sweep stops starting runs (drainAt, checked at
// the moment of every start) and when it stops the running ones as a
// cancellation would, SIGTERM then SIGKILL after Grace, with Reason
// Interrupted but without making Wait return an error (terminateAt). A
// zero time means never. A batch job that ends at a known time drains some
// minutes before its end and terminates at least Grace before it, so that
// every run has ended when the scheduler kills the job; when the job's end
// moves (scontrol update TimeLimit), call it again. Moving a deadline that
// has already passed does not undo what it did.
func (e *Execution) SetDeadlines(drainAt, terminateAt time.Time) {
	e.schedMu.Lock()
	e.sched.SetDeadlines(drainAt, terminateAt)
	e.schedMu.Unlock()
	e.signal()
}

func newExecution(ctx context.Context, opts Options) (*Execution, error) {
	parallel, err := opts.check()
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	start := time.Now()
	sched, err := schedule.New(opts.policy(parallel), start)
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	sched.SetDeadlines(opts.DrainAt, opts.TerminateAt)
	sched.Resume(opts.Resume)
	var pr *pruning
	if opts.Prune != nil {
		if pr, err = newPruning(opts); err != nil {
			return nil, fmt.Errorf("execute: %w", err)
		}
	}
	if err := proc.Setup(); err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	e := &Execution{
		ctx:      ctx,
		opts:     opts,
		grace:    opts.GracePeriod(),
		patterns: append(slices.Clip(opts.FailPatterns), failure.Builtin...),
		sched:    sched,
		pruning:  pr,
		jobs:     make(map[schedule.Key]*job),
		paused:   pausing{runs: map[string]*job{}},
		wake:     make(chan struct{}, 1),
		next:     make(chan run.Run),
		life:     newLife(),
	}
	e.tally.sum.Start = start
	e.env = newEnvBuilder(os.Environ(), proc.Session(), &e.opts)
	if opts.Live != nil {
		e.live = &liveWriter{w: opts.Live}
	}
	if err := e.dirs.open(opts.OutputDir, opts.TempDir); err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	if opts.EnforceMem && opts.MemCgroup != "" {
		if e.cgroups, err = proc.NewCgroups(opts.MemCgroup); err != nil {
			e.dirs.close()
			return nil, fmt.Errorf("execute: enforce mem: %w", err)
		}
	}
	return e, nil
}

// halt stops the starting of runs; running ones are left alone.
func (e *Execution) halt() { e.life.halt() }

// drain stops the starting of runs and says so in the summary.
func (e *Execution) drain() {
	e.tally.mu.Lock()
	e.tally.sum.Drained = true
	e.tally.mu.Unlock()
	e.halt()
}

// halted reports whether runs may no longer start. It checks the context
// and Kill itself rather than wait for the goroutines that close stop.
func (e *Execution) halted() bool {
	select {
	case <-e.life.stop:
		return true
	default:
	}
	if e.ctx.Err() != nil || e.killed() {
		e.halt()
		return true
	}
	return false
}

// mayStart decides, at the moment of a start, whether the start may go
// ahead: the sweep is not stopped and its drain deadline has not come.
func (e *Execution) mayStart() bool {
	if e.halted() {
		return false
	}
	e.schedMu.Lock()
	ok, draining := e.sched.MayStart(time.Now()), e.sched.Draining()
	e.schedMu.Unlock()
	if !ok && draining {
		e.drain()
	}
	return ok
}

func (e *Execution) killed() bool {
	select {
	case <-e.life.kill:
		return true
	default:
		return false
	}
}

// fail records the first source or setup error and stops new runs.
func (e *Execution) fail(err error) {
	e.endStream(err)
	e.halt()
}

// endStream keeps err as the sweep's error unless it has one: the source
// ends there, and the runs already read still run.
func (e *Execution) endStream(err error) {
	e.tally.mu.Lock()
	defer e.tally.mu.Unlock()
	if e.tally.err == nil {
		e.tally.err = err
	}
}

func (e *Execution) emit(ev run.Event) {
	if e.opts.OnEvent == nil {
		return
	}
	e.eventMu.Lock()
	defer e.eventMu.Unlock()
	e.opts.OnEvent(ev)
}

// feed hands runs to the scheduler one at a time, so the source is read
// only as fast as the scheduler's queue takes them.
func (e *Execution) feed(runs iter.Seq2[run.Run, error]) {
	defer close(e.next)
	for r, err := range runs {
		if err != nil {
			e.endStream(err)
			return
		}
		select {
		case e.next <- r:
		case <-e.life.stop:
			return
		}
	}
}

// sleepUntil waits for t and reports whether runs may still start; it
// gives up early when the sweep stops or, if not nil, when also is closed.
func (e *Execution) sleepUntil(t time.Time, also <-chan struct{}) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-e.life.stop:
		case <-also:
			return false
		}
	}
	return !e.halted()
}

// runAll runs the attempts of job j from its Start st, until its last
// attempt ends or a retry of it is placed anew (the scheduler starts it
// again).
func (e *Execution) runAll(j *job, st schedule.Start) {
	r := &j.run
	if r.ID == "" {
		r.ID = strconv.Itoa(r.Index)
	}
	if !run.ValidID(r.ID) {
		e.fail(fmt.Errorf("execute: %s: run id %q is not a file name", originOf(*r), r.ID))
		e.release(j, true)
		return
	}
	prior := e.opts.Resume.Attempts(r.ID)
	for {
		if e.opts.Fenced != nil && e.opts.Fenced(r.ID) {
			e.release(j, true) // another's now: it runs there
			return
		}
		j.attempts++
		n := j.attempts // this sweep's, across placements
		end, err := e.runAttempt(attemptSpec{run: j.run, key: j.key, lane: st.Lane, n: prior + n, promoted: j.promoted})
		after, ok := e.ended(j, st.Lane, n, end, err)
		if !ok {
			return
		}
		if !after.Retry || after.Anew {
			e.release(j, !after.Retry) // done, or back to the queue's head without a backoff
			return
		}
		if !e.sleepUntil(after.At, nil) || !e.takeTurn(j) {
			e.release(j, true) // stopped while waiting: the ledger's retry mark makes a resume run it
			return
		}
	}
}

// ended handles how attempt n of j (this sweep's count) ended: it tells
// the scheduler, counts and reports the attempt, and says what follows;
// ok is false when nothing does (the sweep stopped it, it failed for the
// runner's reasons, or it was paused), and j was released.
func (e *Execution) ended(j *job, lane, n int, end attemptEnd, err error) (after schedule.After, ok bool) {
	ev, started := end.ev, end.started
	if files := (*filesError)(nil); errors.As(err, &files) {
		// Its directory, logs or scratch: not the run's doing. The
		// attempt fails as setup, and the sweep goes on, unless the
		// node's disk is full or failing (below).
		var node bool
		if ev, node = e.setupFailed(ev, files.err); node {
			err = &nodeError{files.err}
		} else {
			started, err = true, nil
		}
	}
	if node := (*nodeError)(nil); errors.As(err, &node) {
		// The node's disk is full or failing: no run can be set up or
		// keep its logs there. The attempt was interrupted, for a
		// rerun to run again, and the sweep starts no more runs.
		e.fail(fmt.Errorf("execute: %s: %w", originOf(j.run), err))
		ev.Place = e.tell(j, schedule.End{Outcome: schedule.Interrupted, Attempt: n}).Held
		e.record(lane, ev, n == 1, false)
		e.emit(ev)
		e.release(j, true)
		return after, false
	}
	if err != nil {
		e.fail(fmt.Errorf("execute: %s: %w", originOf(j.run), err))
		e.release(j, true)
		return after, false
	}
	if !started {
		e.release(j, true) // the sweep stopped before this attempt could start
		return after, false
	}
	if ev.Reason != run.Interrupted && e.opts.Fenced != nil && e.opts.Fenced(ev.Run.ID) {
		// It ended where it was no longer this sweep's to end (a pool
		// task whose lease lapsed, or whose claim was taken): whatever
		// its exit, it is not done here.
		ev.Reason, ev.Class = run.Interrupted, ""
	}
	outcome := outcome(ev)
	outcome.Attempt, outcome.NoRetry = n, e.halted()
	after = e.tell(j, outcome)
	ev.Retry = after.Retry
	ev.Place = after.Held // gpu_mem=auto may have shrunk its claim
	e.record(lane, ev, n == 1, after.Halt)
	e.emit(ev)
	if ev.Reason == run.Paused && end.paused != nil {
		e.pause(j, *end.paused) // among the paused runs, for a promotion
		return after, false
	}
	return after, true
}

// takeTurn waits for the turn of a retry of j in its place
// (MinStartInterval), and reports whether runs may still start.
func (e *Execution) takeTurn(j *job) bool {
	for {
		e.schedMu.Lock()
		at, ok := e.sched.Turn(j.key, time.Now())
		e.schedMu.Unlock()
		if ok {
			return true
		}
		if !e.sleepUntil(at, nil) {
			return false
		}
	}
}

func originOf(r run.Run) string {
	if r.Origin != "" {
		return r.Origin
	}
	return "run " + r.ID
}

// record counts a finished attempt; first says it was the run's first in
// this sweep, halt that its failure reached MaxFailures.
func (e *Execution) record(i int, ev run.Event, first, halt bool) {
	e.tally.mu.Lock()
	defer e.tally.mu.Unlock()
	s := &e.tally.sum
	s.Attempts++
	if first {
		s.Runs++
	}
	if ev.PID != 0 {
		for len(s.LaneBusy) <= i {
			s.LaneBusy = append(s.LaneBusy, 0)
		}
		s.LaneBusy[i] += ev.End.Sub(ev.Start)
	}
	if ev.Retry {
		return
	}
	switch ev.Reason {
	case run.OK:
		s.Succeeded++
	case run.Interrupted:
		s.Interrupted++
	case run.Pruned:
		s.Pruned++
	case run.Paused:
		// Counted at the end: the runs still paused (a promotion may follow).
	default:
		s.Failed++
		if ev.Reason == run.TimedOut {
			s.TimedOut++
		}
		if s.Classes == nil {
			s.Classes = map[failure.Class]int{}
		}
		s.Classes[ev.Class]++
		if len(s.Failures) < maxReportedFailures {
			s.Failures = append(s.Failures, ev)
		}
		if halt {
			s.Stopped = true
			e.halt()
		}
	}
}
