package execute

import (
	"errors"
	"fmt"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// settleSamples and settleInterval are the readiness gate's measure: a
// run's GPU memory has settled when it has held for settleSamples samples
// settleInterval apart.
const (
	settleSamples  = 3
	settleInterval = time.Second
)

// job is a run the scheduler knows: from its arrival to its last
// attempt's end, across the placements of a retry placed anew.
type job struct {
	key      schedule.Key
	run      run.Run
	attempts int // this sweep's
	// promoted says its attempts from now on resume a paused run
	// (Pruner.Promote, or one an earlier session paused, run without that
	// policy).
	promoted bool
}

// RequestOf returns what run r asks for: its own Request, else
// o.Request.
func (o *Options) RequestOf(r run.Run) pack.Request {
	if r.Request != nil {
		return *r.Request
	}
	return o.Request
}

// hasTopology reports whether runs are placed.
func (o *Options) hasTopology() bool { return len(o.Topology.CPUs) > 0 || len(o.Topology.GPUs) > 0 }

// policy is the scheduler's configuration from o; parallel is o.Parallel
// made concrete without a Topology.
func (o *Options) policy(parallel int) schedule.Config {
	c := schedule.Config{
		Topology:         o.Topology,
		Request:          o.Request,
		Parallel:         parallel,
		BackfillWait:     o.BackfillWait,
		Window:           o.Window,
		Stagger:          o.Stagger,
		MinStartInterval: o.MinStartInterval,
		SettleTimeout:    o.SettleTimeout,
		Measured:         o.Sampler != nil,
		Retries:          o.Retries,
		RetryBackoff:     o.RetryBackoff,
		MaxFailures:      o.MaxFailures,
		Retry:            o.Retry,
		DensityMargin:    o.DensityMargin,
		DensityWindow:    o.DensityWindow,
	}
	return c
}

// signal wakes the scheduling loop: something it decides on changed.
func (e *Execution) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// schedule is the loop that carries out the scheduler's decisions: it
// pulls runs from the feeder into the scheduler, starts the runs it
// decides to start, drains and terminates at the deadlines, and waits for
// the next event (a run, an end, a settled gate, a fault, the clock). It
// returns once nothing more can start and no run holds a place.
func (e *Execution) schedule() {
	next := e.next
	for {
		e.schedMu.Lock()
		halted := e.halted()
		if halted {
			e.sched.Stop()
		} else {
			e.fill(&next)
		}
		plan, err := e.sched.Next(time.Now())
		if plan.Terminate {
			e.life.terminateNow()
		}
		if plan.Drain {
			e.drain()
		}
		var refused *schedule.RunError
		if errors.As(err, &refused) {
			j := e.jobs[refused.Key]
			delete(e.jobs, refused.Key)
			e.fail(fmt.Errorf("execute: %s: %w", originOf(j.run), refused.Err))
		}
		for _, st := range plan.Starts {
			e.launch(st)
		}
		room := e.sched.Room()
		done := (halted || next == nil && e.sched.Waiting() == 0) && e.sched.Placed() == 0
		e.schedMu.Unlock()
		if e.opts.OnDensity != nil {
			for _, c := range plan.Densities {
				e.opts.OnDensity(c)
			}
		}
		if done {
			return
		}
		e.await(plan.Wake, &next, room, halted)
	}
}

// await waits for the next event of the loop: a run from the feeder (when
// the scheduler has room), a wake, the clock (wake, if not zero), or the
// sweep's stop.
func (e *Execution) await(wake time.Time, next *chan run.Run, room, halted bool) {
	in, stop := *next, e.life.stop
	if !room || halted {
		in = nil
	}
	if halted {
		stop = nil // closed: it would wake the loop at once, for ever
	}
	var timeout <-chan time.Time
	if !wake.IsZero() {
		timer := time.NewTimer(time.Until(wake))
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case r, ok := <-in:
		e.schedMu.Lock()
		if !ok {
			*next = nil
		} else if !e.halted() { // a halted sweep starts nothing more
			e.push(r, next)
		}
		e.schedMu.Unlock()
	case <-e.wake:
	case <-timeout:
	case <-stop:
	}
}

// fill takes the runs the feeder has ready while the scheduler has room
// (schedMu held).
func (e *Execution) fill(next *chan run.Run) {
	defer func() {
		if *next == nil {
			e.promote()
		}
	}()
	for *next != nil && e.sched.Room() {
		select {
		case r, ok := <-*next:
			if !ok {
				*next = nil
				return
			}
			e.push(r, next)
		default:
			return
		}
	}
}

// push hands a run to the scheduler (schedMu held). A run that can never
// fit ends the stream as a source error would: the runs before it still
// run.
func (e *Execution) push(r run.Run, next *chan run.Run) {
	r.Paused = r.Paused || e.opts.Resume.Paused(r.ID)
	if r.Paused && e.repause(r) {
		return
	}
	// A run paused before that this policy does not pause (none, or
	// another) runs from its checkpoint: a promotion, counted at its pause.
	e.add(&job{run: r, promoted: r.Paused}, next)
}

// add hands job j to the scheduler (schedMu held); see push.
func (e *Execution) add(j *job, next *chan run.Run) {
	r := j.run
	req := e.opts.RequestOf(r)
	shape := ""
	if req.AutoGPUMem || req.AutoShare {
		shape = schedule.Shape(r.Args)
	}
	key, err := e.sched.Add(req, shape)
	if err != nil {
		e.endStream(fmt.Errorf("execute: %s: %w", originOf(r), err))
		if next != nil {
			*next = nil
		}
		return
	}
	j.key = key
	e.jobs[key] = j
}

// launch starts the run of st in its own goroutine (schedMu held).
func (e *Execution) launch(st schedule.Start) {
	for len(e.dirs.lanes) <= st.Lane {
		e.dirs.lanes = append(e.dirs.lanes, new(string))
	}
	j := e.jobs[st.Key]
	e.workers.Go(func() { e.runAll(j, st) })
}

// tell tells the scheduler how an attempt of j ended and returns what
// follows. Unless that is a retry in place, the caller reports the end and
// then calls release.
func (e *Execution) tell(j *job, end schedule.End) schedule.After {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	return e.sched.Ended(j.key, end, time.Now())
}

// release gives j's place back; final says the run is over (no retry
// placed anew follows), and the scheduler forgets it.
func (e *Execution) release(j *job, final bool) {
	e.schedMu.Lock()
	e.sched.Release(j.key)
	if final {
		delete(e.jobs, j.key)
	}
	e.schedMu.Unlock()
	e.signal()
}

// began tells the scheduler an attempt of run k began at t (its process
// starts, or fails to): the next start under MinStartInterval is timed
// from it.
func (e *Execution) began(k schedule.Key, t time.Time) {
	if e.opts.MinStartInterval <= 0 {
		return // nothing to time: no lock, no wake, on every start
	}
	e.schedMu.Lock()
	e.sched.Began(k, t)
	e.schedMu.Unlock()
	e.signal()
}

// gate tells the scheduler the attempt of spec, placed at place, has
// started and returns the Settle to give the Sampler when the attempt
// holds its GPU for the readiness gate or measures gpu_mem=auto; else nil.
func (e *Execution) gate(spec attemptSpec, place pack.Assignment) *usage.Settle {
	k, n := spec.key, spec.n
	e.schedMu.Lock()
	watch := e.sched.Started(k, n, time.Now())
	e.schedMu.Unlock()
	if e.opts.Sampler == nil && place.SharedGPUs && place.Request.GPUMem > 0 {
		e.blind("the runs are not measured") // the scheduler has no gate for them
	}
	if !watch {
		return nil
	}
	e.signal() // the loop wakes at the gate's timeout
	settled := func(peak uint64) {
		e.schedMu.Lock()
		e.sched.Settled(k, n, peak)
		e.schedMu.Unlock()
		e.signal()
	}
	// No reading will come: the gate opens at once (a peak of 0 teaches
	// gpu_mem=auto nothing).
	blind := func(why string) {
		e.blind(why)
		settled(0)
	}
	return &usage.Settle{Interval: settleInterval, Samples: settleSamples, Done: settled, Blind: blind}
}

// blind tells the sweep, once, that no run's GPU memory can be read here,
// and why.
func (e *Execution) blind(why string) {
	e.noted.blind.Do(func() {
		e.note("the GPU memory of each run cannot be read here (" + why + "): runs sharing a GPU by gpu_mem start without waiting for the runs before them to allocate theirs, and gpu_mem=auto measures nothing (its runs keep a GPU each)")
	})
}

// note tells OnNote, if set.
func (e *Execution) note(line string) {
	if e.opts.OnNote != nil {
		e.opts.OnNote(line)
	}
}

// assignment returns what run k holds now (gpu_mem=auto may have shrunk
// it).
func (e *Execution) assignment(k schedule.Key) pack.Assignment {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	return e.sched.Assignment(k)
}

// faulted reports whether a GPU run k holds was taken out of use.
func (e *Execution) faulted(k schedule.Key) bool {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	return e.sched.Faulted(k)
}

// watchFaults takes the GPUs that report a fault out of use, until the
// channel closes or the sweep has ended.
func (e *Execution) watchFaults(faults <-chan usage.GPUFault) {
	for {
		select {
		case f, ok := <-faults:
			if !ok {
				return
			}
			e.gpuOut(f)
		case <-e.life.done:
			return
		}
	}
}

// gpuOut takes the GPU of fault f (and its MIG devices) out of use for
// the rest of the sweep (see schedule.Scheduler.Fault). Runs on it go on
// until they end; with no GPU left the sweep drains.
func (e *Execution) gpuOut(f usage.GPUFault) {
	e.schedMu.Lock()
	retired, none := e.sched.Fault(f.UUID)
	e.schedMu.Unlock()
	if !retired {
		return // not ours, or out already
	}
	if none {
		e.drain()
	}
	e.tally.mu.Lock()
	e.tally.sum.GPUsOut = append(e.tally.sum.GPUsOut, f)
	e.tally.sum.NoGPUsLeft = none
	e.tally.mu.Unlock()
	if e.opts.OnGPUFault != nil {
		e.eventMu.Lock()
		e.opts.OnGPUFault(f, none)
		e.eventMu.Unlock()
	}
	e.signal()
}

// outcome is how the scheduler sees an attempt that ended as ev says;
// the caller sets End.Attempt (this sweep's count, not ev's) and NoRetry.
func outcome(ev run.Event) schedule.End {
	end := schedule.End{Class: ev.Class, Peak: peakOf(ev.Usage.Sampled)}
	switch ev.Reason {
	case run.OK:
		end.Outcome = schedule.Succeeded
	case run.Failed, run.TimedOut:
		end.Outcome = schedule.Failed
	default:
		end.Outcome = schedule.Interrupted // and Pruned: never retried either
	}
	return end
}

// peakOf is the GPU memory an attempt's processes were measured to use.
func peakOf(s usage.Sampled) uint64 {
	var peak uint64
	for _, g := range s.GPUs {
		peak += g.ProcessPeakMemoryBytes
	}
	return peak
}
