package runner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// waitDelay bounds how long Wait keeps reading a run's output pipes (Live
// mode only) after the run ended, in case an escaped descendant still holds
// them; the sweeper normally kills such a holder well before.
const waitDelay = 2 * time.Second

// attemptKey names one attempt of one run, as its environment does.
type attemptKey struct {
	id      string
	attempt int
}

// Execute runs every run from runs on the given slots and returns when the
// source is exhausted and all started runs have ended, or after it stopped
// early. Each slot runs one run at a time, with the slot's Assignment, and
// takes the next run as soon as one ends; slot i's first run waits
// i×Stagger.
//
// A run's exit status is data, not an error: failures are counted in the
// Summary and reported through OnEvent. Execute returns a non-nil error when
//   - ctx was cancelled: new runs stop, every running process group gets
//     SIGTERM and, after Grace, SIGKILL; the error wraps context.Cause(ctx);
//   - Options.Kill was closed: the same, but SIGKILL at once;
//   - runs yielded an error: that ends the stream, the runs read before it
//     still run, and the error is returned as is;
//   - the setup failed (bad options, unwritable OutputDir, CPUs that cannot
//     be set); running runs finish first.
//
// The Summary is valid in every case. Execute may be called concurrently;
// see the package documentation for its process-wide effects.
func Execute(ctx context.Context, slots []pack.Slot, runs iter.Seq2[Run, error], opts Options) (Summary, error) {
	e, err := newExecution(ctx, slots, opts)
	if err != nil {
		return Summary{}, err
	}
	defer os.RemoveAll(e.scratch)

	stopOnCancel := context.AfterFunc(ctx, e.halt)
	defer stopOnCancel()
	done := make(chan struct{})
	defer close(done)
	if opts.Kill != nil {
		go func() {
			select {
			case <-opts.Kill:
				e.halt()
			case <-done:
			}
		}()
	}
	if opts.Drain != nil || !opts.DrainAt.IsZero() || !opts.TerminateAt.IsZero() {
		go e.watchDrain(done)
	}

	go e.feed(runs)
	var wg sync.WaitGroup
	for i := range slots {
		wg.Go(func() { e.work(i) })
	}
	wg.Wait()
	e.halt() // releases the feeder if it is still waiting to hand over a run
	sweepAll()

	e.sum.End = time.Now()
	switch {
	case ctx.Err() != nil:
		return e.sum, fmt.Errorf("execute: interrupted: %w", context.Cause(ctx))
	case e.killed():
		return e.sum, errors.New("execute: killed")
	}
	return e.sum, e.err
}

// execution is the state of one Execute call.
type execution struct {
	ctx         context.Context
	opts        Options
	slots       []pack.Slot
	env         *envBuilder
	live        *liveWriter
	outDir      string // absolute; "" for no logs
	scratch     string // parent of the per-run TMPDIRs
	grace       time.Duration
	maxFailures int

	next     chan Run      // runs handed from the source to the slots
	stop     chan struct{} // closed when no run may start any more
	haltOnce sync.Once

	terminate     chan struct{} // closed at Options.TerminateAt
	terminateOnce sync.Once

	gateMu   sync.Mutex
	gateNext time.Time // earliest next start under MinStartInterval

	mu  sync.Mutex // guards sum and err
	sum Summary
	err error // first source or setup error

	eventMu sync.Mutex // serialises OnEvent

	pathMu sync.Mutex
	paths  map[string]string // command name → path found in PATH
}

func newExecution(ctx context.Context, slots []pack.Slot, opts Options) (*execution, error) {
	if len(slots) == 0 {
		return nil, errors.New("execute: no slots")
	}
	switch opts.GPUIDs {
	case "", GPUUUIDs, GPUIndices:
	default:
		return nil, fmt.Errorf("execute: gpu ids %q: want %q or %q", opts.GPUIDs, GPUUUIDs, GPUIndices)
	}
	for _, s := range slots {
		for _, c := range s.CPUs {
			if c < 0 {
				return nil, fmt.Errorf("execute: slot %d: cpu %d", s.Slot, c)
			}
		}
	}
	if err := setup(); err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	e := &execution{
		ctx:         ctx,
		opts:        opts,
		slots:       slots,
		grace:       opts.Grace,
		maxFailures: opts.MaxFailures,
		next:        make(chan Run),
		paths:       make(map[string]string),
		stop:        make(chan struct{}),
		terminate:   make(chan struct{}),
	}
	e.env = newEnvBuilder(os.Environ(), &e.opts)
	if e.grace <= 0 {
		e.grace = DefaultGrace
	}
	if opts.FailFast {
		e.maxFailures = 1
	}
	if opts.Live != nil {
		e.live = &liveWriter{w: opts.Live}
	}
	if opts.OutputDir != "" {
		dir, err := filepath.Abs(opts.OutputDir)
		if err != nil {
			return nil, fmt.Errorf("execute: output dir: %w", err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
			return nil, fmt.Errorf("execute: output dir: %w", err)
		}
		e.outDir = dir
	}
	base := opts.TempDir
	if base == "" {
		base = os.Getenv("SLURM_TMPDIR")
	}
	if base == "" {
		base = os.TempDir()
	}
	scratch, err := os.MkdirTemp(base, "nodepack-")
	if err != nil {
		return nil, fmt.Errorf("execute: temp dir: %w", err)
	}
	e.scratch = scratch
	e.sum.SlotBusy = make([]time.Duration, len(slots))
	e.sum.Start = time.Now()
	e.gateNext = e.sum.Start
	return e, nil
}

// halt stops the starting of runs; running ones are left alone.
func (e *execution) halt() { e.haltOnce.Do(func() { close(e.stop) }) }

// watchDrain stops the starting of runs when Drain is closed or at
// DrainAt, and stops running ones at TerminateAt; it returns when done is
// closed.
func (e *execution) watchDrain(done <-chan struct{}) {
	timer := func(t time.Time) <-chan time.Time {
		if t.IsZero() {
			return nil
		}
		tm := time.NewTimer(time.Until(t))
		return tm.C
	}
	drainAt, terminateAt := timer(e.opts.DrainAt), timer(e.opts.TerminateAt)
	drain := e.opts.Drain
	for {
		select {
		case <-drain:
			drain = nil
			e.drain()
		case <-drainAt:
			drainAt = nil
			e.drain()
		case <-terminateAt:
			e.drain()
			e.terminateOnce.Do(func() { close(e.terminate) })
			return
		case <-done:
			return
		}
	}
}

// drain stops the starting of runs and says so in the summary.
func (e *execution) drain() {
	e.mu.Lock()
	e.sum.Drained = true
	e.mu.Unlock()
	e.halt()
}

// halted reports whether runs may no longer start. It checks the context
// and Kill itself rather than wait for the goroutines that close stop.
func (e *execution) halted() bool {
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

func (e *execution) killed() bool {
	if e.opts.Kill == nil {
		return false
	}
	select {
	case <-e.opts.Kill:
		return true
	default:
		return false
	}
}

// fail records the first source or setup error and stops new runs.
func (e *execution) fail(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	e.halt()
}

func (e *execution) emit(ev Event) {
	if e.opts.OnEvent == nil {
		return
	}
	e.eventMu.Lock()
	defer e.eventMu.Unlock()
	e.opts.OnEvent(ev)
}

// feed hands runs to the slots one at a time, so the source is read only as
// fast as runs start.
func (e *execution) feed(runs iter.Seq2[Run, error]) {
	defer close(e.next)
	for run, err := range runs {
		if err != nil {
			// The stream ends here; runs already read still run.
			e.mu.Lock()
			if e.err == nil {
				e.err = err
			}
			e.mu.Unlock()
			return
		}
		select {
		case e.next <- run:
		case <-e.stop:
			return
		}
	}
}

// work is slot i's loop.
func (e *execution) work(i int) {
	slot := e.slots[i]
	first := true
	for {
		var run Run
		select {
		case r, ok := <-e.next:
			if !ok {
				return
			}
			run = r
		case <-e.stop:
			return
		}
		if first {
			first = false
			if !e.sleepUntil(e.sum.Start.Add(time.Duration(i) * e.opts.Stagger)) {
				return
			}
		}
		if !e.runAll(i, slot, run) {
			return
		}
	}
}

// sleepUntil waits for t and reports whether runs may still start.
func (e *execution) sleepUntil(t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-e.stop:
		}
	}
	return !e.halted()
}

// waitTurn spaces starts by MinStartInterval and reports whether the start
// may go ahead.
func (e *execution) waitTurn() bool {
	if e.opts.MinStartInterval <= 0 {
		return !e.halted()
	}
	e.gateMu.Lock()
	at := time.Now()
	if at.Before(e.gateNext) {
		at = e.gateNext
	}
	e.gateNext = at.Add(e.opts.MinStartInterval)
	e.gateMu.Unlock()
	return e.sleepUntil(at)
}

// runAll runs one run's attempts in slot i and reports whether the slot
// should go on.
func (e *execution) runAll(i int, slot pack.Slot, run Run) bool {
	if run.ID == "" {
		run.ID = strconv.Itoa(run.Index)
	}
	if !validID(run.ID) {
		e.fail(fmt.Errorf("execute: %s: run id %q is not a file name", originOf(run), run.ID))
		return false
	}
	prior := 0
	if e.opts.PriorAttempts != nil {
		prior = max(0, e.opts.PriorAttempts(run.ID))
	}
	for n := 1; ; n++ {
		if !e.waitTurn() {
			return false
		}
		ev, err := e.attempt(slot, run, prior+n)
		if err != nil {
			e.fail(fmt.Errorf("execute: slot %d: %s: %w", slot.Slot, originOf(run), err))
			return false
		}
		ev.Retry = (ev.Reason == Failed || ev.Reason == TimedOut) && n <= e.opts.Retries && !e.halted()
		e.record(i, ev, n == 1)
		e.emit(ev)
		if !ev.Retry {
			return true
		}
	}
}

func originOf(run Run) string {
	if run.Origin != "" {
		return run.Origin
	}
	return "run " + run.ID
}

// record counts a finished attempt; first says it was the run's first in
// this Execute.
func (e *execution) record(i int, ev Event, first bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.sum
	s.Attempts++
	if first {
		s.Runs++
	}
	if ev.PID != 0 {
		s.SlotBusy[i] += ev.End.Sub(ev.Start)
	}
	if ev.Retry {
		return
	}
	switch ev.Reason {
	case OK:
		s.Succeeded++
	case Interrupted:
		s.Interrupted++
	default:
		s.Failed++
		if ev.Reason == TimedOut {
			s.TimedOut++
		}
		if len(s.Failures) < MaxReportedFailures {
			s.Failures = append(s.Failures, ev)
		}
		if e.maxFailures > 0 && s.Failed >= e.maxFailures && !s.Stopped {
			s.Stopped = true
			e.halt()
		}
	}
}

// attempt runs attempt n of run and returns its Finished event. An error
// means the runner could not prepare the attempt, which is not the run's
// fault; a command that cannot start is a failed attempt.
func (e *execution) attempt(slot pack.Slot, run Run, n int) (Event, error) {
	ev := Event{Kind: Started, Run: run, Attempt: n, Slot: slot}
	var runDir string
	var stdout, stderr *os.File
	if e.outDir != "" {
		runDir = filepath.Join(e.outDir, "runs", run.ID)
		if err := os.Mkdir(runDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return ev, err
		}
		ev.Stdout = filepath.Join(runDir, "stdout.log")
		ev.Stderr = filepath.Join(runDir, "stderr.log")
		var err error
		if stdout, err = openLog(ev.Stdout, n); err != nil {
			return ev, err
		}
		defer stdout.Close()
		if stderr, err = openLog(ev.Stderr, n); err != nil {
			return ev, err
		}
		defer stderr.Close()
	}
	// The scratch directory is private to this Execute, so the name is free.
	tmpDir := filepath.Join(e.scratch, run.ID+"."+strconv.Itoa(n))
	if err := os.Mkdir(tmpDir, 0o700); err != nil {
		return ev, err
	}
	defer os.RemoveAll(tmpDir)

	argv := append(slices.Clip(e.opts.Wrap), run.Args...)
	if len(argv) == 0 {
		return e.notStarted(ev, errors.New("empty command")), nil
	}
	cmd := e.command(argv)
	cmd.Dir = run.Dir
	cmd.Env = e.env.build(attemptEnv{run: run, slot: slot, attempt: n, runDir: runDir, tmpDir: tmpDir})
	var outW, errW *lineWriter
	switch {
	case e.live != nil:
		prefix := []byte("[" + run.ID + "] ")
		outW = &lineWriter{live: e.live, prefix: prefix}
		errW = &lineWriter{live: e.live, prefix: prefix}
		if stdout != nil {
			outW.file, errW.file = stdout, stderr
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.WaitDelay = waitDelay
	case stdout != nil:
		cmd.Stdout, cmd.Stderr = stdout, stderr // the child writes to the files itself
	}

	p, startErr, err := startProcess(cmd, slot.CPUs, attemptKey{run.ID, n})
	if err != nil {
		return ev, err
	}
	if startErr != nil {
		return e.notStarted(ev, startErr), nil
	}
	ev.PID = p.pid
	ev.Start = time.Now()
	e.emit(ev)

	var timeout <-chan time.Time
	if e.opts.Timeout > 0 {
		t := time.NewTimer(e.opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var stopSampling func() SampledUsage
	if e.opts.Sampler != nil {
		stopSampling = e.opts.Sampler.Sample(SampleTarget{Root: p.child, SkipRoot: p.child != p.pid, GPUs: gpuUUIDs(slot)})
	}
	var reason Reason
	select {
	case <-p.exited:
	case <-timeout:
		reason = TimedOut
		e.stopProcess(p)
	case <-e.ctx.Done():
		reason = Interrupted
		e.stopProcess(p)
	case <-e.terminate:
		reason = Interrupted
		e.stopProcess(p)
	case <-e.opts.Kill:
		reason = Interrupted
		p.signal(syscall.SIGKILL)
		<-p.exited
	}
	ev.End = time.Now()
	var sampled SampledUsage
	if stopSampling != nil {
		sampled = stopSampling()
	}
	exit := p.finish()
	waitErr := exit.err
	if outW != nil {
		outW.flush()
		errW.flush()
	}

	ev.Kind = Finished
	ev.ExitCode = exit.code
	ev.Signal = exit.signal
	ev.Usage = exit.usage
	ev.Usage.Sampled = sampled
	switch {
	case reason != "":
		ev.Reason = reason
	case ev.ExitCode == 0:
		ev.Reason = OK
	case e.stoppedAround(ev.Signal):
		ev.Reason = Interrupted
	default:
		ev.Reason = Failed
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		ev.Err = waitErr
	}
	return ev, nil
}

// stopWindow is how long a run's death by a stop signal may precede the
// stop of the whole sweep and still count as an interruption.
const stopWindow = 500 * time.Millisecond

// stoppedAround reports whether a run that died of signal sig was stopped
// together with the sweep. Batch systems signal every process of a job at
// once (scancel, a time limit, preemption), so the run's death can reach
// nodepack before its own SIGTERM does; that run was interrupted, not
// failed. Only deaths by SIGTERM, SIGINT, SIGHUP and SIGKILL wait for the
// window, and only while the sweep is not already stopping.
func (e *execution) stoppedAround(sig string) bool {
	switch sig {
	case "SIGTERM", "SIGINT", "SIGHUP", "SIGKILL":
	default:
		return false
	}
	t := time.NewTimer(stopWindow)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
	case <-e.terminate:
	case <-e.opts.Kill:
	case <-t.C:
		return false
	}
	return true
}

// command is exec.Command with PATH lookups cached for the Execute: with
// many short runs the lookup is a tenth of the runner's own CPU time. Only
// successful lookups are kept, and argv[0] is left as given.
func (e *execution) command(argv []string) *exec.Cmd {
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

// stopProcess sends SIGTERM to the run's group and SIGKILL after the grace
// period, or at once if Kill is closed meanwhile; it returns once the run's
// process has exited.
func (e *execution) stopProcess(p *process) {
	p.signal(syscall.SIGTERM)
	grace := time.NewTimer(e.grace)
	defer grace.Stop()
	select {
	case <-p.exited:
		return
	case <-grace.C:
	case <-e.opts.Kill:
	}
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// notStarted completes ev for an attempt whose command could not start.
func (e *execution) notStarted(ev Event, err error) Event {
	ev.Kind = Finished
	ev.Start = time.Now()
	ev.End = ev.Start
	ev.ExitCode = -1
	ev.Reason = Failed
	ev.Err = err
	return ev
}

// openLog opens a log file for attempt n: the first attempt starts it
// afresh, later ones append after a header line.
func openLog(path string, n int) (*os.File, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if n == 1 {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	if n > 1 {
		if _, err := fmt.Fprintf(f, "--- nodepack: attempt %d ---\n", n); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// exitInfo is how an attempt's process ended.
type exitInfo struct {
	code   int    // as exitCode
	signal string // as Event.Signal
	usage  Usage
	err    error // cmd.Wait's
}

func gpuUUIDs(slot pack.Slot) []string {
	uuids := make([]string, len(slot.GPUs))
	for i, g := range slot.GPUs {
		uuids[i] = g.UUID
	}
	return uuids
}

// exitCode reports a process's exit status the way shells do: 128+N for a
// death by signal N; -1 if unknown.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
