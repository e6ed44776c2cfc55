package execute

import (
	"sync"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// runStop is how the runner stops one running attempt, from goroutines
// other than the attempt's own, which waits for its process to exit (on
// the thread that forked it, see proc.Launch) and so cannot select.
type runStop struct {
	p      *proc.Process
	timer  *time.Timer // Options.Timeout's; nil without one
	remove func()      // takes it out of the sweep's live processes

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
	case <-st.p.Exited():
		return false
	default:
	}
	st.reason = reason
	return true
}

// watch registers the attempt's process for the sweep's stops (one that
// starts as the sweep is being stopped is stopped at once) and arms its
// timeout; unwatch undoes it once the process has exited.
func (e *Execution) watch(p *proc.Process) *runStop {
	st := &runStop{p: p}
	st.remove = e.procs.Add(p, func() { e.stopRun(st, run.Interrupted) })
	if e.opts.Timeout > 0 {
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
	st.remove()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.reason
}

// runStops are the running attempts by run, for Fence.
type runStops struct {
	mu sync.Mutex
	m  map[string]*runStop
}

func (r *runStops) add(id string, st *runStop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*runStop{}
	}
	r.m[id] = st
}

func (r *runStops) remove(id string, st *runStop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[id] == st {
		delete(r.m, id)
	}
}

// matching returns the attempts of the runs for which f returns true.
func (r *runStops) matching(f func(id string) bool) []*runStop {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runStop
	for id, st := range r.m {
		if f(id) {
			out = append(out, st)
		}
	}
	return out
}

// watchStops stops every running attempt when the sweep is stopped: by a
// cancellation or the terminate deadline (SIGTERM, then SIGKILL after the
// grace or at Kill) or by Kill (SIGKILL at once). Attempts that start
// later are stopped as they start (see watch). It returns when the sweep
// is done.
func (e *Execution) watchStops() {
	select {
	case <-e.ctx.Done():
	case <-e.life.terminate:
	case <-e.life.kill:
	case <-e.life.done:
		return
	}
	e.procs.StopAll()
}

// stopRun stops the attempt for reason, unless it is being stopped already.
func (e *Execution) stopRun(st *runStop, reason run.Reason) {
	if st.begin(reason) {
		st.p.Stop(e.ladder(st))
	}
}

// ladder is how an attempt is stopped: a checkpoint first
// (Options.CheckpointSignal) when the run keeps checkpoints, for at most
// the grace, so that what a stop loses is what the run did since its last
// one; then SIGTERM to the run's group, and SIGKILL after the grace, or at
// once once Kill is called.
func (e *Execution) ladder(st *runStop) proc.Ladder {
	st.mu.Lock()
	ckpt := st.ckpt
	st.mu.Unlock()
	l := proc.Ladder{Grace: e.grace, Kill: e.life.kill}
	keeps := func() bool { return ckpt != nil && ckpt.keepsNow(min(e.grace, time.Second), true) }
	if schedule.CheckpointFirst(e.opts.CheckpointSignal != 0, e.killed(), keeps) {
		l.First, l.Saved = e.opts.CheckpointSignal, ckpt.ask()
	}
	return l
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
	case <-e.life.terminate:
	case <-e.life.kill:
	case <-t.C:
		return false
	}
	return true
}
