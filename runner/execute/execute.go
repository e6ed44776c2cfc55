package execute

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// waitDelay bounds how long Wait keeps reading a run's output pipes (Live
// mode only) after the run ended, in case an escaped descendant still holds
// them; the sweeper normally kills such a holder well before. A variable
// for the test that holds that it does.
var waitDelay = 2 * time.Second

// ErrKilled is what Wait returns (wrapped) when Kill stopped the sweep.
var ErrKilled = errors.New("killed")

// attemptKey names one attempt of one run, as its environment does.
type attemptKey struct {
	id      string
	attempt int
}

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
	env          *envBuilder
	live         *liveWriter
	outDir       string       // absolute; "" for no logs
	runs         *runsDir     // outDir/runs, held open; nil for no logs
	scratch      string       // parent of the per-run TMPDIRs
	memGroups    *memGroups   // EnforceMem's cgroups; nil when it samples or is off
	pruning      *pruning     // Prune's state; nil without
	running      atomic.Int64 // attempts whose process runs
	outside      atomic.Int64 // attempts ended by a stop signal the runner did not send (StopSignal)
	tmpSeq       atomic.Int64
	grace        time.Duration
	start        time.Time // when Start was called; never written after
	stopOnCancel func() bool

	next      chan run.Run  // runs handed from the source to the scheduler
	stop      chan struct{} // closed when no run may start any more
	haltOnce  sync.Once
	blindOnce sync.Once     // the note that GPU memory cannot be read, said once
	autoNoted atomic.Bool   // the note that a gpus=auto run reported no step
	mps       mpsDaemon     // the sweep's MPS control daemon, once a run shares a GPU
	kill      chan struct{} // closed by Kill
	killOnce  sync.Once
	terminate chan struct{} // closed when the terminate deadline passes
	termOnce  sync.Once
	done      chan struct{} // closed once the scheduler and every run have returned
	workers   sync.WaitGroup

	// schedMu guards the policy (see package schedule), the runs it knows
	// and each lane's TMPDIR; wake wakes the loop that carries it out.
	schedMu sync.Mutex
	sched   *schedule.Scheduler
	jobs    map[schedule.Key]*job
	paused  pausing // the paused runs, for promotion (Options.Prune): Summary.Paused at the end
	// promotions counts the paused runs promoted: Summary.Promoted.
	promotions int
	tmp        []*string // each lane's TMPDIR, reused while runs leave it empty; "" for none yet
	wake       chan struct{}

	stopsMu  sync.Mutex
	stops    map[*runStop]struct{} // the attempts whose process runs, for watchStops
	stopping bool                  // watchStops has stopped them: stop new ones at once

	turn     chan struct{} // the token a start holds while it waits out MinStartInterval
	turnNext time.Time     // earliest next start; used only by the token's holder

	mu  sync.Mutex // guards sum and err
	sum Summary
	err error // first source or setup error

	eventMu sync.Mutex // serialises OnEvent

	pathMu sync.Mutex
	paths  map[string]string // command name → path found in PATH

	patterns []failure.Pattern // Options.FailPatterns, then failure.Builtin

	waitOnce sync.Once
	result   Summary
	resErr   error
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
	e.waitOnce.Do(func() {
		e.workers.Wait()
		e.halt() // releases the feeder if it is still waiting to hand over a run
		close(e.done)
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
		sweepAll()
		os.RemoveAll(e.scratch)
		untrackScratch(e.scratch)
		if e.runs != nil {
			e.runs.close()
		}
		if e.memGroups != nil {
			e.memGroups.close()
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.sum.End = time.Now()
		e.sum.OutsideStops = int(e.outside.Load())
		e.schedMu.Lock()
		for len(e.sum.LaneBusy) < e.sched.Lanes() {
			e.sum.LaneBusy = append(e.sum.LaneBusy, 0)
		}
		e.sum.Paused, e.sum.Promoted = len(e.paused), e.promotions
		for _, j := range e.paused {
			if j.attempts == 0 {
				// Paused by an earlier session and never promoted by this
				// one: a run of this sweep all the same, so that the
				// summary's parts add up to its runs.
				e.sum.Runs++
			}
		}
		e.schedMu.Unlock()
		e.result, e.resErr = e.sum, e.err
		switch {
		case e.ctx.Err() != nil:
			e.resErr = fmt.Errorf("execute: interrupted: %w", context.Cause(e.ctx))
		case e.killed():
			e.resErr = fmt.Errorf("execute: %w", ErrKilled)
		}
	})
	return e.result, e.resErr
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
	e.killOnce.Do(func() { close(e.kill) })
	e.halt()
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
	switch opts.GPUIDs {
	case "", GPUUUIDs, GPUIndices:
	default:
		return nil, fmt.Errorf("execute: gpu ids %q: want %q or %q", opts.GPUIDs, GPUUUIDs, GPUIndices)
	}
	parallel := opts.Parallel
	switch {
	case parallel < 0:
		return nil, fmt.Errorf("execute: parallel %d: must not be negative", parallel)
	case parallel == 0 && opts.hasTopology():
		parallel = math.MaxInt // as many as fit: the runs' requests bound them
	case parallel == 0:
		parallel = runtime.NumCPU()
	}
	if opts.hasTopology() {
		parallel = opts.Parallel // 0: as many as fit
	}
	start := time.Now()
	sched, err := schedule.New(opts.policy(parallel), start)
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	sched.SetDeadlines(opts.DrainAt, opts.TerminateAt)
	var pr *pruning
	if opts.Prune != nil {
		if pr, err = newPruning(opts); err != nil {
			return nil, fmt.Errorf("execute: %w", err)
		}
	}
	if opts.EnforceMem && opts.MemCgroup == "" && opts.Sampler == nil {
		return nil, errors.New("execute: enforce mem needs a memory cgroup to make groups in or a Sampler to check the runs' memory")
	}
	for c, n := range opts.Retry {
		if !c.Valid() || c == failure.Interrupted || n < 0 {
			return nil, fmt.Errorf("execute: retry %s=%d: want a failure class other than interrupted and a count of at least 0", c, n)
		}
	}
	switch opts.MPS {
	case MPSAuto, MPSOff:
	case MPSOn:
		if _, err := mpsPath(&opts); err != nil {
			return nil, fmt.Errorf("execute: mps on: %w", err)
		}
	default:
		return nil, fmt.Errorf("execute: mps %q: want auto, on or off (empty)", opts.MPS)
	}
	if err := setup(); err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	e := &Execution{
		ctx:       ctx,
		opts:      opts,
		grace:     opts.GracePeriod(),
		sched:     sched,
		pruning:   pr,
		jobs:      make(map[schedule.Key]*job),
		paused:    pausing{},
		wake:      make(chan struct{}, 1),
		next:      make(chan run.Run),
		paths:     make(map[string]string),
		stops:     make(map[*runStop]struct{}),
		stop:      make(chan struct{}),
		kill:      make(chan struct{}),
		terminate: make(chan struct{}),
		done:      make(chan struct{}),
		turn:      make(chan struct{}, 1),
		patterns:  append(slices.Clip(opts.FailPatterns), failure.Builtin...),
	}
	e.env = newEnvBuilder(os.Environ(), sessionToken(), &e.opts)
	if opts.Live != nil {
		e.live = &liveWriter{w: opts.Live}
	}
	if opts.OutputDir != "" {
		dir, err := filepath.Abs(opts.OutputDir)
		if err != nil {
			return nil, fmt.Errorf("execute: output dir: %w", err)
		}
		if e.runs, err = openRunsDir(filepath.Join(dir, "runs")); err != nil {
			return nil, fmt.Errorf("execute: output dir: %w", err)
		}
		e.outDir = dir
	}
	base := opts.TempDir
	if base == "" {
		base = os.TempDir()
	}
	removeStaleScratch(base) // left by a nodepack killed with its supervisor
	scratch, err := os.MkdirTemp(base, scratchPrefix())
	if err != nil {
		return nil, fmt.Errorf("execute: temp dir: %w", err)
	}
	e.scratch = scratch
	trackScratch(scratch) // the supervisor removes it if this process dies
	if opts.EnforceMem && opts.MemCgroup != "" {
		if e.memGroups, err = newMemGroups(opts.MemCgroup); err != nil {
			os.RemoveAll(scratch)
			return nil, fmt.Errorf("execute: enforce mem: %w", err)
		}
	}
	e.start = start
	e.sum.Start = e.start
	e.turnNext = e.start
	return e, nil
}

// halt stops the starting of runs; running ones are left alone.
func (e *Execution) halt() { e.haltOnce.Do(func() { close(e.stop) }) }

// drain stops the starting of runs and says so in the summary.
func (e *Execution) drain() {
	e.mu.Lock()
	e.sum.Drained = true
	e.mu.Unlock()
	e.halt()
}

// halted reports whether runs may no longer start. It checks the context
// and Kill itself rather than wait for the goroutines that close stop.
func (e *Execution) halted() bool {
	select {
	case <-e.stop:
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
	case <-e.kill:
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
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
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
		case <-e.stop:
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
		case <-e.stop:
		case <-also:
			return false
		}
	}
	return !e.halted()
}

// waitTurn spaces starts by MinStartInterval and reports whether the start
// may go ahead. With an interval, the start takes the one turn token and
// must give it back with endTurn: starts pass one at a time, each at least
// the interval after the previous one really began.
func (e *Execution) waitTurn() bool {
	if e.opts.MinStartInterval <= 0 {
		return !e.halted()
	}
	select {
	case e.turn <- struct{}{}:
	case <-e.stop:
		return false
	}
	if !e.sleepUntil(e.turnNext, nil) { // turnNext is only used by the token's holder
		<-e.turn
		return false
	}
	return true
}

// endTurn gives the turn back after a start that began at started (zero:
// the start did not happen).
func (e *Execution) endTurn(started time.Time) {
	if e.opts.MinStartInterval <= 0 {
		return
	}
	if !started.IsZero() {
		e.turnNext = started.Add(e.opts.MinStartInterval)
	}
	<-e.turn
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
	prior := 0
	if e.opts.PriorAttempts != nil {
		prior = max(0, e.opts.PriorAttempts(r.ID))
	}
	for {
		j.attempts++
		n := j.attempts // this sweep's, across placements
		ev, started, err := e.attempt(j, st.Lane, prior+n)
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
			e.fail(fmt.Errorf("execute: %s: %w", originOf(*r), err))
			ev.Place = e.ended(j, schedule.End{Outcome: schedule.Interrupted, Attempt: n}).Held
			e.record(st.Lane, ev, n == 1, false)
			e.emit(ev)
			e.release(j, true)
			return
		}
		if err != nil {
			e.fail(fmt.Errorf("execute: %s: %w", originOf(*r), err))
			e.release(j, true)
			return
		}
		if !started {
			e.release(j, true) // the sweep stopped before this attempt could start
			return
		}
		end := outcome(ev)
		end.Attempt, end.NoRetry = n, e.halted()
		after := e.ended(j, end)
		ev.Retry = after.Retry
		ev.Place = after.Held // gpu_mem=auto may have shrunk its claim
		e.record(st.Lane, ev, n == 1, after.Halt)
		e.emit(ev)
		if ev.Reason == run.Paused && j.pausedAt != nil {
			e.pause(j) // among the paused runs, for a promotion
			return
		}
		if !after.Retry || after.Anew {
			e.release(j, !after.Retry) // done, or back to the queue's head without a backoff
			return
		}
		if !e.sleepUntil(after.At, nil) {
			e.release(j, true) // stopped while waiting: the ledger's retry mark makes a resume run it
			return
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
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.sum
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

// attemptFiles are one attempt's log files and private directories.
type attemptFiles struct {
	runDir         string   // "" without OutputDir
	dir            *os.File // runDir, held open for the attempt: its files are read from it
	createdRunDir  bool     // this attempt made runDir
	stdout, stderr *os.File
	tmpDir         string
	lane           *string // the lane's TMPDIR, which tmpDir is
	stderrFrom     int64   // where this attempt's part of stderr.log begins
}

// close closes the logs and empties the private TMPDIR for the lane's next
// run; with unused, it also removes a run directory this attempt made,
// since nothing ran.
func (f *attemptFiles) close(unused bool) {
	if f.stdout != nil {
		f.stdout.Close()
		f.stderr.Close()
	}
	if f.tmpDir != "" && !pristine(f.tmpDir) {
		// Left with files, or changed: the lane's next run gets a new one.
		os.RemoveAll(f.tmpDir)
		*f.lane = ""
	}
	if unused && f.createdRunDir {
		os.RemoveAll(f.runDir)
	}
	if f.dir != nil {
		f.dir.Close()
		f.dir = nil
	}
}

// prepare makes attempt n's run directory, logs and TMPDIR. The logs are
// not truncated yet: begin does that once the attempt really starts.
func (e *Execution) prepare(ev *run.Event, lane, n int) (*attemptFiles, error) {
	f := &attemptFiles{}
	if e.runs != nil {
		// Made and opened from runs/, following no symbolic link (see
		// runsDir); made again if a temp cleaner removed runs/.
		dir, created, err := e.runs.runDir(ev.Run.DirName())
		if err != nil {
			return nil, err
		}
		f.dir = dir // closed with the logs
		f.runDir, f.createdRunDir = dir.Name(), created
		ev.Stdout = filepath.Join(f.runDir, "stdout.log")
		ev.Stderr = filepath.Join(f.runDir, "stderr.log")
		if f.stdout, err = openIn(dir, "stdout.log", false, created); err != nil {
			f.close(true)
			return nil, err
		}
		if f.stderr, err = openIn(dir, "stderr.log", false, created); err != nil {
			f.stdout.Close()
			f.stdout = nil
			f.close(true)
			return nil, err
		}
		if f.createdRunDir {
			if err := writeParams(dir, ev.Run); err != nil {
				f.close(true)
				return nil, err
			}
		}
		if n == 1 && !created {
			// The run's first attempt by the ledger, in a directory an
			// earlier ledger left (--restart, a ledger removed): it
			// starts from scratch, as its logs do.
			link, err := setAside(dir, time.Now())
			if err != nil {
				f.close(true)
				return nil, err
			}
			if link != "" {
				e.note(fmt.Sprintf("run %s starts from scratch: its %s folder was a symbolic link, which was set aside as %s (the link, not what it points to), and it gets a new, empty folder; a run that links the folder again to the same place resumes from what is there",
					ev.Run.ID, CheckpointDir, link))
			}
		}
		if err := makeCheckpointDir(dir); err != nil {
			f.close(true)
			return nil, err
		}
	}
	// One TMPDIR per lane, emptied by each run's end: a lane runs one
	// attempt at a time, and the scratch directory is private to this
	// sweep, so the name is free.
	e.schedMu.Lock()
	f.lane = e.tmp[lane]
	e.schedMu.Unlock()
	if *f.lane != "" && !present(*f.lane) {
		*f.lane = "" // a temp cleaner took it
	}
	if *f.lane == "" {
		dir := filepath.Join(e.scratch, strconv.Itoa(lane)+"."+strconv.FormatInt(e.tmpSeq.Add(1), 10))
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrNotExist) {
			// A temp cleaner removed the scratch root: make it again.
			if err = os.MkdirAll(e.scratch, 0o700); err == nil {
				err = os.Mkdir(dir, 0o700)
			}
		}
		if err != nil {
			f.close(true)
			return nil, err
		}
		*f.lane = dir
	}
	f.tmpDir = *f.lane
	return f, nil
}

// present reports whether a directory is at path.
func present(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.IsDir()
}

// begin readies the logs for attempt n once it is sure to start: the first
// attempt starts them afresh, later ones append after a header line.
func (f *attemptFiles) begin(n int) error {
	for _, log := range []*os.File{f.stdout, f.stderr} {
		if log == nil {
			continue
		}
		if n == 1 && f.createdRunDir {
			continue // new files
		}
		if n == 1 {
			if err := log.Truncate(0); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(log, "--- nodepack: attempt %d ---\n", n); err != nil {
			return err
		}
		if log == f.stderr {
			// Its failure is read from here on, not from the attempts before.
			if st, err := log.Stat(); err == nil {
				f.stderrFrom = st.Size()
			}
		}
	}
	return nil
}

// attempt runs attempt n of run and returns its Finished event; started is
// false when the sweep stopped (or its drain deadline came) before the
// attempt could start, and then nothing ran. An error means the runner
// could not prepare the attempt, which is not the run's fault; a command
// that cannot start is a failed attempt.
func (e *Execution) attempt(j *job, lane, n int) (ev run.Event, started bool, err error) {
	place := e.assignment(j)
	ev = run.Event{Kind: run.Started, Run: j.run, Attempt: n, Lane: lane, Place: place, Promoted: j.promoted}
	files, err := e.prepare(&ev, lane, n)
	if err != nil {
		return ev, false, &filesError{err}
	}
	cmd, outW, errW, cmdErr := e.command(ev, files, n, false)
	var metricsAt int64 // the metrics file's size as the attempt began: steps past it are its own
	if files.dir != nil {
		metricsAt, _, _ = statIn(files.dir, metrics.FileName)
	}

	// The turn and the deadline are checked last, right before the start,
	// so MinStartInterval and the drain deadline hold at the process start.
	if !e.waitTurn() {
		files.close(true)
		return ev, false, nil
	}
	if !e.mayStart() {
		e.endTurn(time.Time{})
		files.close(true)
		return ev, false, nil
	}
	defer files.close(false)
	if err := files.begin(n); err != nil {
		e.endTurn(time.Time{})
		return ev, false, &filesError{err}
	}
	ev.Start = time.Now()
	e.endTurn(ev.Start)
	if cmdErr != nil {
		return e.notStarted(ev, cmdErr), true, nil
	}
	limit := e.memLimit(place)
	var group *memGroup
	if limit > 0 && e.memGroups != nil {
		if group, err = e.memGroups.make(limit); err != nil {
			return ev, false, err
		}
		defer group.remove()
	}
	oomBefore, oomKnown := e.oomKills()
	p, err := startProcess(cmd, place.CPUs, group, attemptKey{j.run.ID, n})
	var notStarted *startError
	if errors.As(err, &notStarted) && errors.Is(notStarted.err, syscall.ENOEXEC) && !slices.Equal(cmd.Args, ev.Run.Args) {
		// A plain line's program that is no executable format (a script
		// without #!): bash runs it as a script of its own.
		if cmd, outW, errW, _ = e.command(ev, files, n, true); cmd.Err == nil {
			p, err = startProcess(cmd, place.CPUs, group, attemptKey{j.run.ID, n})
		}
	}
	if errors.As(err, &notStarted) {
		return e.notStarted(ev, notStarted.err), true, nil
	}
	if err != nil {
		return ev, false, err
	}
	ev.PID = p.pid
	e.running.Add(1)
	e.emit(ev)

	target := usage.Target{Root: p.pid, GPUs: place.UUIDs(), Settle: e.gate(j, n, place)}
	var overMem atomic.Uint64 // the tree's memory when the sampler found it over limit
	if limit > 0 && group == nil {
		target.Limit = &usage.Limit{Bytes: limit, Interval: MemCheckInterval, Exceeded: func(rss uint64) {
			overMem.Store(rss)
			p.signal(syscall.SIGKILL)
		}}
	}
	var overGPU atomic.Uint64 // the tree's GPU memory when the sampler found it over gpu_mem and the headroom
	gpuLimit := gpuMemLimit(place)
	if gpuLimit > 0 {
		target.GPULimit = &usage.Limit{Bytes: gpuLimit, Interval: GPUMemCheckInterval, Exceeded: func(b uint64) {
			overGPU.Store(b)
			p.signal(syscall.SIGKILL) // at once: its neighbours' memory is at stake
		}}
	}
	var stopSampling func() usage.Sampled
	if e.opts.Sampler != nil {
		stopSampling = e.opts.Sampler.Sample(target)
	}
	stop := e.watch(p)
	ckpt := newCheckpoints(files.dir, e.opts.CheckpointSignal != 0 || e.pruning != nil)
	stop.setCheckpoints(ckpt)
	stopMetrics := e.watchMetrics(j, ev, files.dir, stop, ckpt)
	p.waitExit()
	stopMetrics()
	ev.End = time.Now()
	reason := e.unwatch(stop)
	var sampled usage.Sampled
	if stopSampling != nil {
		sampled = stopSampling()
	}
	exit := p.finish()
	e.running.Add(-1)
	if outW != nil {
		outW.flush()
		errW.flush()
	}
	e.classify(&ev, reason, exit)
	if ev.Reason != run.OK && !ev.Reason.JudgedOut() {
		oomAfter, ok := e.oomKills()
		// Killed, or a shell whose child was (128+9): the kernel's OOM
		// killer sends SIGKILL.
		killed := ev.Signal == "SIGKILL" || ev.ExitCode == 128+int(syscall.SIGKILL)
		o := failure.Outcome{OOMKilled: oomKnown && ok && oomAfter > oomBefore && killed, GPUFault: e.faulted(j)}
		// Over its own limit, the run's is the only process that the
		// kernel or the runner can have killed: whatever the exit, that
		// is why it failed.
		var over string
		switch {
		case overGPU.Load() > 0:
			held := (overGPU.Load() + 1<<20 - 1) >> 20 << 20 // in MiB, rounded up
			over = fmt.Sprintf("killed: its processes held %s of GPU memory, over the gpu_mem=%s it asked for and the GPU's %s headroom, before the runs beside it ran out",
				pack.FormatSize(held), pack.FormatSize(place.Request.GPUMem), pack.FormatSize(gpuLimit-place.Request.GPUMem))
			o.OverGPUMem = true
		case overMem.Load() > 0:
			held := (overMem.Load() + 1<<20 - 1) >> 20 << 20 // in MiB, rounded up
			over = fmt.Sprintf("killed: its processes held %s, over the mem=%s it asked for", pack.FormatSize(held), pack.FormatSize(limit))
			o.OOMKilled = true
		case group != nil && group.oomKills() > 0:
			over = fmt.Sprintf("the kernel's OOM killer killed a process of this run at the mem=%s it asked for", pack.FormatSize(limit))
			o.OOMKilled = true
		}
		if over != "" {
			if files.stderr != nil {
				fmt.Fprintf(files.stderr, "--- nodepack: %s ---\n", over)
			}
		}
		e.name(&ev, o, files.stderrFrom)
	}
	ev.Usage.Sampled = sampled
	if files.dir != nil {
		// Read from the run's directory nodepack made and holds open,
		// following no link: a run's files are untrusted.
		var progress metrics.Progress
		ev.Metrics, ev.Curves, ev.MetricsSkipped, progress = metrics.ReportIn(untrusted.In(files.dir), "stdout.log", e.opts.Metrics, curvePoints)
		if size, _, _ := statIn(files.dir, metrics.FileName); size > metricsAt && progress.Stepped {
			first, _ := metrics.FirstStep(untrusted.In(files.dir), metrics.FileName, metricsAt)
			ev.Steps = stepsOf(progress, true, first, ckpt)
		}
	}
	if ev.Reason == run.Failed && files.runDir != "" {
		// A run whose logs could not be written fails in its own way
		// (an echo's exit 1, a Python traceback it could not print): ask
		// the disk they are on. Full or failing is the node's fault.
		if err := probeDisk(files.runDir); err != nil {
			if class, node := failure.OfSetup(err); node {
				ev.Reason, ev.Class, ev.Retry = run.Interrupted, class, false
				ev.Err = fmt.Errorf("the disk of its directory and logs: %w", err)
				return ev, true, &nodeError{err}
			}
		}
	}
	return ev, true, nil
}

// curvePoints is how many points of each per-step metric's curve go to
// the ledger with each attempt: enough for the report to draw its shape
// for any run (the best runs' curves it reads whole from their files).
const curvePoints = 12

// nodeError is attempt's error for an attempt that ran, and found the
// node's disk under its directory full or failing: the attempt is
// recorded as interrupted, and the sweep stops starting runs.
type nodeError struct{ err error }

func (e *nodeError) Error() string { return e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// probeDisk writes 64 KiB in dir and removes it: the error says whether
// the disk there has room (ENOSPC, EDQUOT) and works (EIO). Local file
// systems say so at the write (they reserve blocks and quota then), NFS at
// the close; the sync, which a busy file system makes slow and a sweep of
// fast-failing runs would pay for each, is only for where little room is
// left.
func probeDisk(dir string) error {
	f, err := os.CreateTemp(dir, ".nodepack-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 64<<10))
	if err == nil && roomLow(dir) {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// command builds attempt n's command: argv (with the Wrap prefix),
// directory, environment and output. A task line that is one plain
// command is started directly (see plainLine), unless shell says through
// bash.
func (e *Execution) command(ev run.Event, files *attemptFiles, n int, shell bool) (cmd *exec.Cmd, outW, errW *lineWriter, err error) {
	args, direct := ev.Run.Args, false
	if words, ok := plainLine(args); ok && len(e.opts.Wrap) == 0 && !shell {
		args, direct = words, true // not under --wrap: its bash may be another's
	}
	argv := append(slices.Clip(e.opts.Wrap), args...)
	if len(argv) == 0 {
		return nil, nil, nil, errors.New("empty command")
	}
	cmd = e.lookup(argv)
	cmd.Env = e.env.build(attemptEnv{run: ev.Run, lane: ev.Lane, place: ev.Place, attempt: n, runDir: files.runDir, tmpDir: files.tmpDir,
		mps: e.mpsEnv(ev.Place)})
	if direct && (cmd.Err != nil || bashFunction(cmd.Env, args[0])) {
		// Not a program bash would find (a builtin's name only, an
		// exported function): bash's to run after all.
		direct = false
		argv = append(slices.Clip(e.opts.Wrap), ev.Run.Args...)
		env := cmd.Env
		cmd = e.lookup(argv)
		cmd.Env = env
	}
	if direct {
		cmd.Env = asBashExecs(cmd.Env, cmd.Path, ev.Run.Dir)
	}
	cmd.Stdin = devNull() // as exec.Cmd gives, without opening it for every run
	cmd.Dir = ev.Run.Dir
	switch {
	case e.live != nil:
		prefix := []byte("[" + label(ev.Run) + "] ")
		outW = &lineWriter{live: e.live, prefix: prefix}
		errW = &lineWriter{live: e.live, prefix: prefix}
		if files.stdout != nil {
			outW.file, errW.file = files.stdout, files.stderr
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.WaitDelay = waitDelay
	case files.stdout != nil:
		cmd.Stdout, cmd.Stderr = files.stdout, files.stderr // the child writes to the files itself
	}
	return cmd, outW, errW, nil
}

// plainLine returns the words of a task line's run, bash -c LINE, when
// LINE is one plain command (run.Plain): bash would only exec it, so it is
// started directly, without bash's own start (about a millisecond of CPU,
// most of a short run's cost). Its ID and its ledger record are the
// line's, as ever.
func plainLine(args []string) ([]string, bool) {
	if len(args) != 3 || args[0] != "bash" || args[1] != "-c" {
		return nil, false
	}
	return run.Plain(args[2])
}

// bashFunction reports whether env exports a bash function named name,
// which bash -c would call rather than a program.
func bashFunction(env []string, name string) bool {
	prefix := "BASH_FUNC_" + name + "%%="
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			return true
		}
	}
	return false
}

// asBashExecs sets in env what bash sets in the environment of a command
// it execs: PWD (the directory it runs in), _ (the program's path),
// SHLVL (0 when not set) and no OLDPWD that is not a directory.
func asBashExecs(env []string, path, dir string) []string {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workingDir(), dir)
	}
	out := make([]string, 0, len(env)+3)
	shlvl := false
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PWD="), strings.HasPrefix(kv, "_="):
			continue
		case strings.HasPrefix(kv, "OLDPWD="):
			if st, err := os.Stat(kv[len("OLDPWD="):]); err != nil || !st.IsDir() {
				continue
			}
		case strings.HasPrefix(kv, "SHLVL="):
			shlvl = true
		}
		out = append(out, kv)
	}
	if !shlvl {
		out = append(out, "SHLVL=0")
	}
	if dir != "" {
		out = append(out, "PWD="+dir)
	}
	return append(out, "_="+path)
}

// workingDir is nodepack's working directory, where runs without a Dir
// start; "" when it cannot be read.
var workingDir = sync.OnceValue(func() string {
	dir, _ := os.Getwd()
	return dir
})

// devNull is /dev/null opened once for reading, every run's standard input;
// nil when it cannot be opened (exec.Cmd then opens it itself).
var devNull = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// runStop is how the runner stops one running attempt, from goroutines
// other than the attempt's own, which waits for its process to exit (on
// the thread that forked it, see startProcess) and so cannot select.
type runStop struct {
	p     *process
	timer *time.Timer // Options.Timeout's; nil without one

	mu     sync.Mutex
	reason run.Reason   // why the runner stopped it; "" while it has not
	ckpt   *checkpoints // what a stop asks a checkpoint of; nil until set
}

func (st *runStop) setCheckpoints(c *checkpoints) {
	st.mu.Lock()
	st.ckpt = c
	st.mu.Unlock()
}

// begin marks the attempt as being stopped for reason and reports whether
// this call did: the first reason is the one reported. A process that
// already exited by itself is not stopped, whatever came too late (a
// timeout that fires, or a pruning judgement taken, as it exits): it ends
// as its exit says.
func (st *runStop) begin(reason run.Reason) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.reason != "" {
		return false
	}
	select {
	case <-st.p.exited:
		return false
	default:
	}
	st.reason = reason
	return true
}

// watch registers the attempt's process for the sweep's stops and arms
// its timeout; unwatch undoes it once the process has exited.
func (e *Execution) watch(p *process) *runStop {
	st := &runStop{p: p}
	e.stopsMu.Lock()
	e.stops[st] = struct{}{}
	stopping := e.stopping
	e.stopsMu.Unlock()
	if stopping {
		// It started as the sweep was being stopped: stop it too.
		go e.stopRun(st, run.Interrupted)
	} else if e.opts.Timeout > 0 {
		st.timer = time.AfterFunc(e.opts.Timeout, func() { e.stopRun(st, run.TimedOut) })
	}
	return st
}

// unwatch returns the reason the runner stopped the attempt, or "" if it
// ended by itself. A stop still under way finds the process exited and
// sends nothing more.
func (e *Execution) unwatch(st *runStop) run.Reason {
	if st.timer != nil {
		st.timer.Stop()
	}
	e.stopsMu.Lock()
	delete(e.stops, st)
	e.stopsMu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.reason
}

// watchStops stops every running attempt when the sweep is stopped: by a
// cancellation or the terminate deadline (SIGTERM, then SIGKILL after the
// grace or at Kill) or by Kill (SIGKILL at once). Attempts that start
// later are stopped as they start (see watch). It returns when the sweep
// is done.
func (e *Execution) watchStops() {
	select {
	case <-e.ctx.Done():
	case <-e.terminate:
	case <-e.kill:
	case <-e.done:
		return
	}
	e.stopsMu.Lock()
	e.stopping = true
	running := make([]*runStop, 0, len(e.stops))
	for st := range e.stops {
		running = append(running, st)
	}
	e.stopsMu.Unlock()
	for _, st := range running {
		go e.stopRun(st, run.Interrupted)
	}
}

// stopRun stops the attempt for reason, unless it is being stopped already.
func (e *Execution) stopRun(st *runStop, reason run.Reason) {
	if st.begin(reason) {
		e.stopProcess(st)
	}
}

// classify completes a Finished event from how the process ended.
func (e *Execution) classify(ev *run.Event, reason run.Reason, exit exitInfo) {
	ev.Kind = run.Finished
	ev.ExitCode = exit.code
	ev.Signal = exit.signal
	ev.Usage = exit.usage
	switch {
	case reason != "":
		ev.Reason = reason
	case ev.ExitCode == 0:
		ev.Reason = run.OK
	case StopSignal(ev.Signal, ev.ExitCode):
		ev.Reason = run.Interrupted
		e.outside.Add(1)
	case e.stoppedAround(ev.Signal):
		ev.Reason = run.Interrupted
	default:
		ev.Reason = run.Failed
	}
	var exitErr *exec.ExitError
	if exit.err != nil && !errors.As(exit.err, &exitErr) && !errors.Is(exit.err, exec.ErrWaitDelay) {
		ev.Err = exit.err
	}
}

// StopSignal reports whether an attempt that the runner did not stop
// ended by a stop signal: killed by SIGTERM, SIGINT or SIGHUP, or exiting
// 128 plus one of their numbers (a shell whose command was killed by one:
// "python train.py && echo done" cannot be exec'd by bash, which waits and
// exits 143 itself). Such an attempt was interrupted, not failed: batch
// systems signal every process of a job (scancel, a time limit,
// preemption) in no order, so a run's death can come well before
// nodepack's own signal, or without one; and a run that did not succeed
// runs again on a rerun, while one recorded failed is skipped. A program
// that sends itself one of these is therefore never failed; the signals a
// program fails by (SIGSEGV, SIGABRT, SIGBUS, SIGKILL from the OOM killer)
// stay failures of class signal.
func StopSignal(sig string, exitCode int) bool {
	switch sig {
	case "SIGTERM", "SIGINT", "SIGHUP":
		return true
	case "":
		switch exitCode - run.ExitSignalBase {
		case int(syscall.SIGTERM), int(syscall.SIGINT), int(syscall.SIGHUP):
			return true
		}
	}
	return false
}

// stopWindow is how long a run's death by SIGKILL may precede the stop of
// the whole sweep and still count as an interruption.
const stopWindow = 500 * time.Millisecond

// stoppedAround reports whether a run that died of SIGKILL was stopped
// together with the sweep: a batch system that kills a job at once kills
// every process of it, nodepack too, but nodepack may see the run's death
// first. Only a death by SIGKILL waits for the window, and only while the
// sweep is not already stopping; the OOM killer's SIGKILL comes alone.
func (e *Execution) stoppedAround(sig string) bool {
	if sig != "SIGKILL" {
		return false
	}
	t := time.NewTimer(stopWindow)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
	case <-e.terminate:
	case <-e.kill:
	case <-t.C:
		return false
	}
	return true
}

// lookup is exec.Command with PATH lookups cached for the sweep: with
// many short runs the lookup is a tenth of the runner's own CPU time. Only
// successful lookups are kept, and argv[0] is left as given.
func (e *Execution) lookup(argv []string) *exec.Cmd {
	name := argv[0]
	if filepath.Base(name) != name {
		return exec.Command(name, argv[1:]...)
	}
	e.pathMu.Lock()
	path, ok := e.paths[name]
	e.pathMu.Unlock()
	if !ok {
		cmd := exec.Command(name, argv[1:]...)
		if cmd.Err != nil {
			return cmd
		}
		e.pathMu.Lock()
		e.paths[name] = cmd.Path
		e.pathMu.Unlock()
		return cmd
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = name
	return cmd
}

// stopProcess asks the run for a checkpoint first (Options.CheckpointSignal,
// for at most the grace), then sends SIGTERM to the run's group and SIGKILL after the grace
// period, or at once if Kill is called meanwhile or was before; it returns
// once the run's process has exited.
func (e *Execution) stopProcess(st *runStop) {
	p := st.p
	st.mu.Lock()
	ckpt := st.ckpt
	st.mu.Unlock()
	if sig := e.opts.CheckpointSignal; sig != 0 && ckpt != nil && !e.killed() && ckpt.keepsNow(min(e.grace, time.Second), true) {
		// A checkpoint first, for at most the grace: what a stop loses is
		// what the run did since its last one.
		saved := ckpt.ask()
		p.signal(sig)
		wait := time.NewTimer(e.grace)
		select {
		case <-p.exited:
			wait.Stop()
			return
		case <-saved:
		case <-wait.C:
		case <-e.kill:
		}
		wait.Stop()
	}
	if !e.killed() {
		p.signal(syscall.SIGTERM)
		grace := time.NewTimer(e.grace)
		defer grace.Stop()
		select {
		case <-p.exited:
			return
		case <-grace.C:
		case <-e.kill:
		}
	}
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// startError is a run's command that could not start (a missing program,
// say): the run's failure, not the runner's. It wraps what exec said, so
// errors.Is(err, fs.ErrNotExist) holds for a missing program.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// filesError is attempt's error for an attempt whose run directory, logs
// or scratch could not be made: that attempt's failure, where any other
// error of the runner's is the sweep's.
type filesError struct{ err error }

func (e *filesError) Error() string { return e.err.Error() }
func (e *filesError) Unwrap() error { return e.err }

// setupFailed completes ev for an attempt the runner could not set up
// because of err (its run directory, logs or scratch), with
// its class (see failure.OfSetup); node says the node is at fault (a full
// disk, an I/O error): then the attempt was interrupted, not failed.
func (e *Execution) setupFailed(ev run.Event, err error) (run.Event, bool) {
	ev.Kind = run.Finished
	if ev.Start.IsZero() {
		ev.Start = time.Now()
	}
	ev.End, ev.ExitCode, ev.PID = time.Now(), -1, 0
	ev.Err = fmt.Errorf("nodepack could not set up the attempt: %w", err)
	class, node := failure.OfSetup(err)
	ev.Reason, ev.Class = run.Failed, class
	if node {
		ev.Reason = run.Interrupted
	}
	return ev, node
}

// notStarted completes ev for an attempt whose command could not start.
func (e *Execution) notStarted(ev run.Event, err error) run.Event {
	ev.Kind = run.Finished
	if ev.Start.IsZero() {
		ev.Start = time.Now()
	}
	ev.End = time.Now()
	ev.ExitCode = -1
	ev.Reason = run.Failed
	ev.Err = err
	e.name(&ev, failure.Outcome{StartErr: err}, 0)
	return ev
}

// memLimit is the memory the run's attempt is held to under EnforceMem:
// what it asks for now (a host-oom retry may ask for more), or 0.
func (e *Execution) memLimit(as pack.Assignment) uint64 {
	if !e.opts.EnforceMem {
		return 0
	}
	return as.Request.Mem
}

// oomKills reads Options.OOMKills, if set.
func (e *Execution) oomKills() (uint64, bool) {
	if e.opts.OOMKills == nil {
		return 0, false
	}
	return e.opts.OOMKills()
}

// name sets the class of a failed attempt and the last lines of its
// standard error; o holds what only the caller knows (a start error, the
// OOM kill count).
func (e *Execution) name(ev *run.Event, o failure.Outcome, stderrFrom int64) {
	o.ExitCode, o.Signal = ev.ExitCode, ev.Signal
	o.TimedOut, o.Interrupted = ev.Reason == run.TimedOut, ev.Reason == run.Interrupted
	var tail []byte
	if ev.Stderr != "" && !o.Interrupted && o.StartErr == nil { // nothing ran: the log holds earlier attempts only
		if rel, err := filepath.Rel(e.outDir, ev.Stderr); err == nil {
			tail = failure.ReadTail(e.outDir, rel, stderrFrom)
		}
	}
	ev.Class = failure.Classify(o, tail, e.patterns)
	ev.StderrTail = failure.LastLines(tail, run.MaxTailLines, run.MaxTailLine)
}

// exitInfo is how an attempt's process ended.
type exitInfo struct {
	code   int    // as exitCode
	signal string // as Event.Signal
	usage  run.Usage
	err    error // cmd.Wait's
}

// exitCode reports a process's exit status the way shells do: 128+N for a
// death by signal N; -1 if unknown.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return waitStatusCode(ws)
	}
	return ps.ExitCode()
}

// waitStatusCode is exitCode for a raw wait status.
func waitStatusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return run.ExitSignalBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}
