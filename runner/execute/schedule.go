package execute

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
)

// DefaultBackfillWait is used when Options.BackfillWait is zero.
const DefaultBackfillWait = time.Minute

// DefaultSettleTimeout is used when Options.SettleTimeout is zero.
const DefaultSettleTimeout = 2 * time.Minute

// settleSamples and settleInterval are the readiness gate's rule: a run's
// GPU memory has settled when it has held for settleSamples samples
// settleInterval apart.
const (
	settleSamples  = 3
	settleInterval = time.Second
)

// autoMargin is what gpu_mem=auto adds to the peak it measured: a tenth,
// at least 512 MiB, for what a later run of the same shape may use more.
func autoMargin(peak uint64) uint64 { return max(peak/10, 512<<20) }

// pending is a run waiting to start, with what it asked for.
type pending struct {
	run   Run
	asked pack.Request
	shape string // with gpu_mem=auto: runs of the same shape share a measurement

	// Across the placements of a run whose retry was placed anew: the
	// request it was requeued with, its attempts in this sweep, and those
	// that failed, by class.
	grown      *pack.Request
	attempts   int
	failedWith map[failure.Class]int
}

// placed is a run that holds resources: from its allocation until its
// last attempt ends.
type placed struct {
	lane  int
	p     *pending
	probe bool // gpu_mem=auto, not measured yet: the run has its GPU alone

	mu       sync.Mutex
	as       pack.Assignment // what it holds now; Resize may change it
	gated    bool            // holds its GPU until its memory settles
	gateDone bool            // the current attempt's gate has opened
	timer    *time.Timer
	learned  bool
}

func (r *placed) assignment() pack.Assignment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.as
}

// scheduler is the state of the one loop that starts runs: the queue of
// waiting runs, the allocator, and the lanes (the Parallel places a run
// can hold). The loop alone uses the queue; lanes, holds and what auto
// learned are shared with the runs' goroutines under mu.
type scheduler struct {
	alloc  *pack.Allocator // nil without a Topology: nothing is placed
	queue  *pack.Queue[*pending]
	window int // how many runs the queue looks ahead

	// wave is the size of the first wave, which Stagger spaces: as many
	// runs of Options.Request as fit the empty node, no more than
	// Parallel; launched counts the runs started so far, retries placed
	// anew included. The loop alone uses them.
	wave, launched int

	mu       sync.Mutex
	parallel int       // lanes there may be
	lanes    []bool    // busy; grown as lanes are first used, so that --parallel 1000000 costs nothing until runs use it
	tmp      []*string // each lane's TMPDIR, reused while runs leave it empty; "" for none yet
	used     int       // lanes used at least once: the highest index + 1
	running  int
	holds    map[string]int            // GPU UUID → runs that hold it for the gate
	learned  map[string]uint64         // shape → measured GPU memory, margin included
	relearn  bool                      // learned changed: re-resolve waiting auto runs
	requeued []*pending                // retries placed anew (placeAnew), for the queue's head
	faults   map[string]usage.GPUFault // GPUs out of use after a fault, by UUID

	wake chan struct{} // something freed: try to start runs

	// placing is held by the scheduling loop while it queues and starts
	// runs, and by gpuOut while it takes a GPU out of use and, with the
	// last one, drains the sweep: the loop never finds the node without
	// GPUs before the drain (which would fail every run that waits as
	// one that can never fit).
	placing sync.Mutex
}

func newScheduler(opts *Options, parallel int) *scheduler {
	s := &scheduler{
		parallel: parallel,
		holds:    map[string]int{},
		learned:  map[string]uint64{},
		wake:     make(chan struct{}, 1),
	}
	s.wave = parallel
	if opts.hasTopology() {
		s.alloc = pack.NewAllocator(opts.Topology)
		s.wave = min(parallel, fitting(opts.Topology, opts.Request, maxWave))
		if opts.Parallel == 0 {
			// No cap of the user's: runs that hold nothing of their own
			// (no GPU, a shared CPU, no memory) are the only ones nothing
			// else bounds; one per CPU at once.
			s.alloc.LimitBare(len(opts.Topology.CPUs))
		}
		if opts.Stagger > 0 && s.wave > 1 {
			s.alloc.Spread(true) // the first wave on distinct GPUs
		}
	}
	// The queue looks ahead four runs a lane for backfilling, and no
	// further than 65,536: a sweep of ten million runs with --parallel
	// 1000000 must not hold millions of runs.
	s.window = max(256, 4*min(s.wave, 1<<14))
	wait := opts.BackfillWait
	switch {
	case wait == 0:
		wait = DefaultBackfillWait
	case wait < 0:
		wait = 0 // strictly in order
	}
	s.queue = pack.NewQueue[*pending](s.alloc, wait)
	return s
}

// maxWave bounds the first wave: the runs of one request that fit a node
// are counted up to it.
const maxWave = 1 << 14

// fitting counts the runs asking for r that fit the empty topology t at
// once, up to limit; a gpu_mem=auto run counts as the GPU of its own it
// has until it is measured.
func fitting(t pack.Topology, r pack.Request, limit int) int {
	if r.AutoGPUMem {
		r.AutoGPUMem, r.GPUShare = false, pack.GPUWhole
	}
	a := pack.NewAllocator(t)
	if r == (pack.Request{}) {
		a.LimitBare(len(t.CPUs))
	}
	n := 0
	for n < limit {
		if _, err := a.Allocate(r); err != nil {
			break
		}
		n++
	}
	return max(n, 1)
}

func (s *scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RequestOf returns what run r asks for: its own Request, else
// o.Request.
func (o *Options) RequestOf(r Run) pack.Request {
	if r.Request != nil {
		return *r.Request
	}
	return o.Request
}

// hasTopology reports whether runs are placed.
func (o *Options) hasTopology() bool { return len(o.Topology.CPUs) > 0 || len(o.Topology.GPUs) > 0 }

// schedule is the loop that starts runs: it pulls runs from the feeder
// into the queue, starts those the queue lets through while lanes are
// free, and waits for a run to end, a gate to open or a lane's stagger.
// It returns when every run has started or the sweep stopped starting
// runs; the runs it started go on in their own goroutines.
func (e *Execution) schedule() {
	s := e.sched
	next := e.next
	for {
		s.placing.Lock()
		if e.halted() {
			s.placing.Unlock()
			return
		}
		e.takeRequeued()
		e.fill(&next)
		wait := e.startReady()
		s.placing.Unlock()
		if e.halted() || next == nil && s.queue.Len() == 0 && !e.mayRequeue() {
			return
		}
		in := next
		if s.queue.Len() >= s.window {
			in = nil // the queue is full: wait for a start
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		select {
		case r, ok := <-in:
			if !ok {
				next = nil
			} else {
				s.placing.Lock()
				if !e.halted() { // a halted sweep starts nothing more
					e.push(r, &next)
				}
				s.placing.Unlock()
			}
		case <-s.wake:
		case <-timeout:
		case <-e.stop:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// requeue sends run p back to the scheduler to start again with request
// more, before the runs that wait; called before its old place is given
// back, so that the loop, woken by that, finds it.
func (e *Execution) requeue(p *pending, more pack.Request) {
	s := e.sched
	p.grown = &more
	s.mu.Lock()
	s.requeued = append(s.requeued, p)
	s.mu.Unlock()
}

// takeRequeued puts the requeued runs at the queue's head, in the order
// they came back.
func (e *Execution) takeRequeued() {
	s := e.sched
	s.mu.Lock()
	back := s.requeued
	s.requeued = nil
	s.mu.Unlock()
	for i := len(back) - 1; i >= 0; i-- {
		s.queue.PushFront(back[i], *back[i].grown)
	}
}

// mayRequeue reports whether a run may still come back to the queue (a
// retry placed anew, see placeAnew), so the loop must wait for it: one has,
// or a placed run still runs.
func (e *Execution) mayRequeue() bool {
	s := e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requeued) > 0 || s.running > 0 && s.alloc != nil
}

// fill takes the runs the feeder has ready, up to the queue's window.
func (e *Execution) fill(next *chan Run) {
	for *next != nil && e.sched.queue.Len() < e.sched.window {
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

// push queues a run with its request, resolved when it is gpu_mem=auto.
// A run that can never fit ends the stream as a source error would: the
// runs before it still run.
func (e *Execution) push(r Run, next *chan Run) {
	s := e.sched
	req := e.opts.RequestOf(r)
	var err error
	switch {
	case s.alloc == nil && req != (pack.Request{}):
		err = fmt.Errorf("execute: %s asks for %v, and there is no Topology to place it on", originOf(r), req)
	case s.alloc != nil:
		if err = s.alloc.Check(req); err != nil {
			err = fmt.Errorf("execute: %s: %w", originOf(r), err)
		}
	}
	if err == nil && req.AutoGPUMem && e.opts.Sampler == nil {
		err = fmt.Errorf("execute: %s asks for gpu_mem=auto, which needs a Sampler to measure it", originOf(r))
	}
	if err != nil {
		e.endStream(err)
		*next = nil
		return
	}
	p := &pending{run: r, asked: req}
	if req.AutoGPUMem {
		p.shape = shapeOf(r)
	}
	s.queue.Push(p, s.resolve(p))
}

// resolve turns a gpu_mem=auto request into what the run asks the
// allocator for: the memory runs of its shape were measured to use, or,
// before any was measured, its GPU alone (a whole GPU's share), to be
// measured.
func (s *scheduler) resolve(p *pending) pack.Request {
	if p.grown != nil {
		return *p.grown
	}
	r := p.asked
	if !r.AutoGPUMem {
		return r
	}
	r.AutoGPUMem = false
	s.mu.Lock()
	mem, ok := s.learned[p.shape]
	s.mu.Unlock()
	if ok {
		r.GPUMem = mem
		return r
	}
	r.GPUShare = pack.GPUWhole
	return r
}

// digits finds the numbers in a command, which runs of one shape differ in.
var digits = regexp.MustCompile(`[0-9]+`)

// shapeOf names what gpu_mem=auto measures once for all runs like r: its
// command with every number blanked out, so that seeds and learning rates
// share a measurement and model=big and model=small do not.
func shapeOf(r Run) string {
	return digits.ReplaceAllString(strings.Join(r.Args, "\x00"), "#")
}

// startReady starts waiting runs while lanes are free and the queue lets
// them through. It returns how long until a staggered lane becomes free,
// when that is what stops it, else 0.
func (e *Execution) startReady() time.Duration {
	s := e.sched
	s.mu.Lock()
	relearn := s.relearn
	s.relearn = false
	s.mu.Unlock()
	if relearn {
		s.queue.Update(func(p *pending, r pack.Request) pack.Request {
			if p.asked.AutoGPUMem {
				return s.resolve(p)
			}
			return r
		})
	}
	for s.queue.Len() > 0 && !e.halted() {
		now := time.Now()
		if wait := e.staggered(now); wait > 0 {
			return wait
		}
		lane := e.freeLane()
		if lane < 0 {
			return 0
		}
		p, as, err := s.queue.Next(now)
		if errors.Is(err, pack.ErrBusy) {
			return 0
		}
		if err != nil {
			e.fail(fmt.Errorf("execute: %s: %w", originOf(p.run), err))
			return 0
		}
		e.launch(lane, p, as)
		if s.launched++; s.launched == s.wave && e.opts.Stagger > 0 && s.alloc != nil {
			s.alloc.Spread(false) // the first wave is out: pack as usual
		}
	}
	return 0
}

// staggered returns how long the next start must wait for the stagger:
// the k-th start of the first wave (k from 0) is not before k×Stagger
// after the sweep's start; later starts do not wait. It waits for the
// clock only, never for a lane: the run goes to whatever is free then.
func (e *Execution) staggered(now time.Time) time.Duration {
	s := e.sched
	if e.opts.Stagger <= 0 || s.launched >= s.wave {
		return 0
	}
	return max(e.start.Add(time.Duration(s.launched)*e.opts.Stagger).Sub(now), 0)
}

// freeLane returns the lowest free lane, or -1 when Parallel are busy.
func (e *Execution) freeLane() int {
	s := e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range min(len(s.lanes)+1, s.parallel) {
		if i >= len(s.lanes) || !s.lanes[i] {
			return i
		}
	}
	return -1
}

// launch starts run p in lane with the resources as, in its own
// goroutine; a run sharing a GPU by memory holds it until it settles.
func (e *Execution) launch(lane int, p *pending, as pack.Assignment) {
	s := e.sched
	r := &placed{lane: lane, p: p, as: as, probe: p.asked.AutoGPUMem && as.Request.GPUShare == pack.GPUWhole && as.Request.GPUMem == 0}
	s.mu.Lock()
	for len(s.lanes) <= lane {
		s.lanes = append(s.lanes, false)
		s.tmp = append(s.tmp, new(string))
	}
	s.lanes[lane] = true
	s.used = max(s.used, lane+1)
	s.running++
	s.mu.Unlock()
	if as.SharedGPUs && as.Request.GPUMem > 0 {
		r.gated = true
		e.hold(as.GPUs[0].UUID)
	}
	e.workers.Go(func() {
		defer e.unplace(r)
		if more := e.runAll(r); more != nil {
			e.requeue(p, *more)
		}
	})
}

// hold keeps new runs off a GPU until as many unholds.
func (e *Execution) hold(uuid string) {
	s := e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[uuid]++; s.holds[uuid] == 1 {
		s.alloc.Hold(uuid)
	}
}

func (e *Execution) unhold(uuid string) {
	s := e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[uuid]--; s.holds[uuid] == 0 {
		s.alloc.Unhold(uuid)
		delete(s.holds, uuid)
	}
	s.signal()
}

// unplace gives back what run r held once its last attempt has ended.
func (e *Execution) unplace(r *placed) {
	s := e.sched
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	gated := r.gated && !r.gateDone
	r.gated = false
	as := r.as
	r.mu.Unlock()
	if gated {
		e.unhold(as.GPUs[0].UUID)
	}
	if s.alloc != nil {
		s.alloc.Release(as)
	}
	s.mu.Lock()
	s.lanes[r.lane] = false
	s.running--
	s.mu.Unlock()
	s.signal()
}

// gate arms the readiness gate for an attempt of r that has just started:
// a run sharing its GPU by memory holds the GPU until the attempt's own
// memory there settles or SettleTimeout passes; a run measured for
// gpu_mem=auto is measured. It returns the Settle to give the Sampler, or
// nil.
func (e *Execution) gate(r *placed, attempt int) *usage.Settle {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gated && !(r.probe && !r.learned) {
		return nil
	}
	if r.gated && r.gateDone {
		// A later attempt starts afresh: hold the GPU again.
		r.gateDone = false
		e.hold(r.as.GPUs[0].UUID)
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timer = time.AfterFunc(e.settleTimeout(), func() { e.settled(r, attempt, 0, false) })
	return &usage.Settle{Interval: settleInterval, Samples: settleSamples, Done: func(peak uint64) { e.settled(r, attempt, peak, true) }}
}

func (e *Execution) settleTimeout() time.Duration {
	if e.opts.SettleTimeout > 0 {
		return e.opts.SettleTimeout
	}
	return DefaultSettleTimeout
}

// settled opens attempt's gate: its memory settled at peak (measured), or
// the time ran out. A run measured for gpu_mem=auto teaches its shape
// what it uses and shrinks its claim to that, so others can join.
func (e *Execution) settled(r *placed, attempt int, peak uint64, measured bool) {
	r.mu.Lock()
	unhold := ""
	if r.gated && !r.gateDone {
		r.gateDone = true
		unhold = r.as.GPUs[0].UUID
	}
	if r.probe && measured && !r.learned {
		e.learn(r, peak)
	}
	r.mu.Unlock()
	if unhold != "" {
		e.unhold(unhold)
	}
	e.sched.signal()
}

// learn records what a run measured for gpu_mem=auto used, and lets it
// claim just that (r.mu held). A peak of 0 (NVML could not tell, as inside
// a container's PID namespace) teaches nothing: runs of the shape keep a
// GPU each.
func (e *Execution) learn(r *placed, peak uint64) {
	if peak == 0 {
		return
	}
	r.learned = true
	s := e.sched
	mem := peak + autoMargin(peak)
	s.mu.Lock()
	mem = max(mem, s.learned[r.p.shape])
	s.learned[r.p.shape] = mem
	s.relearn = true
	s.mu.Unlock()
	want := r.p.asked
	want.AutoGPUMem, want.GPUMem = false, mem
	if as, err := s.alloc.Resize(r.as, want); err == nil {
		r.as = as
	}
}

// learnAtEnd teaches a shape from a measured run that ended before its
// memory settled, from the peak its Sampler saw.
func (e *Execution) learnAtEnd(r *placed, sampled usage.Sampled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.probe || r.learned {
		return
	}
	var peak uint64
	for _, g := range sampled.GPUs {
		peak += g.ProcessPeakMemoryBytes
	}
	e.learn(r, peak)
}
