// Package schedule is nodepack's scheduling policy, all of it, as a pure
// state machine: events come in (a run arrives, its attempt starts, its
// GPU memory settles, it ends with a class and what it measured, a GPU
// faults, the deadlines move, the clock), decisions come out (start run K
// in lane L on this Assignment, retry it here after a backoff or anew with
// a bigger request, drain, terminate, wake me at T). It starts no process,
// reads no clock and sleeps nowhere: the caller (package execute) tells it
// the time and carries out what it decides, and a test drives it in
// virtual time.
//
// The rules, each a table case in schedule_test.go:
//
//   - Lanes: at most Config.Parallel runs at once, each in the lowest free
//     lane (a run's NODEPACK_SLOT). Parallel 0 means as many as their
//     requests fit the Topology; runs that hold nothing of their own (the
//     zero Request) are then at most one per CPU at once, since nothing
//     else bounds them.
//   - Order and backfill: runs start in the order they arrive, except that
//     a run may start ahead of one that does not fit yet for at most
//     Config.BackfillWait; then the waiting run reserves what frees up
//     until it fits (pack.Queue).
//   - Stagger: lane k of the first wave (as many runs of the default
//     Request as fit at once, no more than Parallel) opens k×Stagger after
//     the start, the lanes past it with its last: at most one more run at
//     once per Stagger while the node fills. An open lane takes the next
//     run as soon as it is free (runs shorter than the stagger reuse the
//     lanes open so far; no run waits for the clock while an open lane is
//     free); the first wave's starts go to distinct GPUs
//     (pack.Allocator.Spread).
//   - MinStartInterval: any two starts (Began) are at least the interval
//     apart: Next hands out one start at a time, and the next only once
//     the one before began and the interval since has passed; a retry in
//     its place asks for its Turn the same way.
//   - Readiness gate: a run that shares its GPU by GPU memory keeps new
//     runs off that GPU from its start until its memory there settles (the
//     caller's sampler says so; a caller that cannot read it says so at
//     once, with a peak of 0) or SettleTimeout passes. Where runs are not
//     measured at all (Config.Measured false) there is no gate: no
//     reading would come.
//   - gpu_mem=auto: the first run of a shape (Shape: its command with
//     every number blanked out, so seeds and learning rates share one and
//     model=big and model=small do not) has its GPU alone and is
//     measured; its peak and a margin become the GPU memory every run of
//     the shape asks for, the measured run's claim shrinks to it, and the
//     waiting ones are resolved again.
//   - gpus=auto (--runs-per-gpu auto), the density rule: runs of one
//     Shape take 1/L of a GPU each, L from 1. The caller reports each
//     run's step as it reads its metrics (Progress); a reading is one
//     run's steps per second over DensityWindow with no run joining or
//     leaving its GPU (a run counts on its GPU from its first report).
//     With four readings at L=1, L becomes 2, and the runs placed shrink
//     to the new share so that more join them at once. At L≥2 the gain
//     is how much more a GPU makes with L runs than with L-1: the runs'
//     own slowdowns between the numbers of runs they were read with,
//     joined by least squares (so runs of one shape that differ in speed
//     do not blur it), times L/(L-1), once max(L-1, 2) such pairs touch
//     L; where runs end too soon to be read twice, the means of all
//     readings, once there are four GPUs' worth at L. A gain above
//     1+DensityMargin tries L+1 (up to pack.AutoRunsPerGPU and what the
//     shape's measured gpu_mem=auto memory holds); above 1 it stays at
//     L, else it steps back to L-1; either is final. A run of the shape
//     that fails cuda-oom or gpu-mem with n gpus=auto runs on its GPU
//     keeps the shape below n for good. Each decision is a
//     DensityChange in the next Plan; table cases in density_test.go.
//   - Retries: a failed attempt is retried while the attempts of its run
//     that failed with that class number at most the class's budget
//     (Config.Retry, else Config.Retries; host-oom and not-found get none
//     unless named). A cuda-oom retry asks for more GPU memory, a host-oom
//     retry for half as much memory again, a gpu-error retry on a faulted
//     GPU (at least once) for another GPU: those are placed anew at the
//     queue's head; other retries keep their place after a backoff that
//     doubles from RetryBackoff up to a minute.
//   - GPU faults: a GPU that reports one is retired with its MIG devices;
//     with none left the sweep drains; waiting runs the rest cannot serve
//     are refused.
//   - MaxFailures: once that many runs have failed, nothing more starts.
//   - Deadlines: nothing starts at or after the drain deadline; at the
//     terminate deadline the caller stops the running runs.
//   - Early stopping (Prune, a Pruner of its own): at each rung of steps
//     FirstStep×Eta^i, a run whose metric is outside the best 1/Eta of
//     the runs that reached the rung before is stopped, asynchronously
//     (ASHA's stopping form); a run that ended before its values were
//     read still counts at the rungs it reached, unstopped (Finish);
//     with Curve, a run is stopped only when even its optimistic forecast
//     at MaxStep is outside the best 1/Eta of the forecasts before it
//     (curve.go). A run judged out that keeps checkpoints is paused
//     (Pause), and Promote gives the paused run that may still win, best
//     first, against its rung as it is now: in its best 1/Eta (its
//     optimistic forecast, with Curve; once, with too few points to
//     forecast). Table cases in prune_test.go and curve_test.go.
//   - The forecast rule (Prune.Forecast, the default with MaxStep and no
//     FirstStep given, which is then MaxStep/8): the rank rule at its
//     rungs, and forecast rungs between them (from FirstStep/Eta, each
//     √2 times the one before) and at MaxStep. A run that reaches MaxStep
//     is a finished run the forecast learns from: its best value so far
//     at each rung and its final value. At a rung, a run's final is
//     forecast from its best value so far there plus the median of what
//     the finished runs nearest to it in value there gained to their
//     final (7 of them, or a quarter); the optimistic end of its interval
//     is that less the rung's split-conformal margin, the
//     ceil((n+1)·0.95)-th smallest miss (forecast less final) of the n
//     finished runs, each forecast from the others (a 95% bound; none
//     while n < 19). A run whose optimistic end is worse than the best
//     final is stopped; else, at a rank rung, the rank rule judges it.
//     One run in four (by its id) is the cautious cohort, judged only
//     from MaxStep/3 on. A paused run may win when, as the sweep is now,
//     its optimistic end reaches the best final and, at a rank rung, its
//     value is in the rung's best 1/Eta; those with a forecast are
//     promoted first, the likeliest best first. A resumed sweep replays
//     the judgements, the last step's too, and so knows the same finished
//     runs. Coverage says how the optimistic ends held on the runs that
//     finished. Table cases in forecast_test.go.
//   - The prior (Pruner.UsePrior, --prune-prior): earlier sweeps' runs of
//     the same metric, their steps mapped onto this policy's by their
//     fraction of the prior's last step. Their finished runs are
//     finished runs the forecast learns from, and its intervals are then
//     calibrated jointly, so that 90% of the finished runs (each
//     forecast from the others) end inside the intervals made for them
//     at every rung at once; but only while the sweep's own runs agree
//     with the prior (on): 4 of them have a value at the first rung, 2
//     of them finished, the prior's forecasts from its runs alone missed
//     no more of those than its own leave-one-out miss rate makes likely
//     (5%), their finals were not better than forecast by 1.5 standard
//     errors of the prior's own residuals, and the scale and progress
//     checks below stand within 1.5 standard errors of a match (the
//     trust gate: off until they do, not dropped). While on, the rank
//     rule and the cautious cohort step aside (the forecast judges at
//     every rung), and the bar a run's optimistic end must reach is the
//     best of the sweep's own: the best final of its finished runs and
//     the best pessimistic end of another of its running runs' latest
//     forecasts. The prior's own finals are never a bar: a prior from an
//     easier task cannot stop every run, since the run that holds the
//     bar is never stopped by it and no run is stopped before the
//     sweep's own runs give one. The checks go on all along, and drop
//     the prior for good (its judgement records why, and a resume
//     replays it) when the sweep's values at the first rung are not of
//     the prior's scale (their mean place among the prior's more than 3
//     standard errors from a half, or more of them in its outer 2.5%
//     tails than one in a thousand matching tasks would give), when its
//     runs learn faster or slower from one rung to the next (each run's
//     mean place among its prior neighbours' gains, 3 standard errors),
//     when its finished runs ended better than forecast by 3 standard
//     errors, or when the misses are that unlikely. Table cases in
//     prior_test.go.
//   - Pause or prune: a run judged out that keeps checkpoints (the caller
//     says so when the pruner asks: Judge's keeps) is paused, else pruned
//     for good (TestPrune).
//   - Metrics reads: a running run's metrics are first read FirstRead
//     after its start, then just after it reaches its next rung at its
//     step time as measured between the reads (an eighth of a step after,
//     a quarter of a step when it is due already: a stop lands within one
//     of its steps), no sooner than the caller's least wait and no later
//     than its interval; while its step time is unknown, twice as far
//     apart each time, from FirstRead again at its first step (NextRead,
//     TestNextRead).
//   - Checkpoint first: a stop asks a run for a checkpoint before SIGTERM
//     when the caller has a signal to ask by, the stop is no kill, and
//     the run keeps checkpoints (CheckpointFirst, TestCheckpointFirst).
//   - GPU memory: a run sharing its one GPU by gpu_mem may use what it
//     asked for plus the GPU's headroom before it is stopped
//     (GPUMemLimit, TestGPUMemLimit).
//   - Shared pool claims (ClaimSize, for the tasks of one submission that
//     draw from the whole sweep): a task with free lanes and no run
//     waiting claims the runs left over twice the tasks started, at least
//     one per free lane, at most four per lane of its own, 256 and what
//     is left (guided self-scheduling).
//     TestClaimSize; TestPoolMakespan holds the makespan of 16 tasks
//     starting up to 3/4 of the ideal span apart within 1.05× the
//     one-pool list-scheduling bound. Such a task's queue holds no more
//     runs waiting than Config.Window (its lanes): it takes runs from its
//     claims as lanes can start them, not hundreds ahead (TestWindow).
//   - Resume: a resumed sweep starts from the State its earlier sessions
//     left (the ledger's fold makes it): each shape's density, the
//     judgements replayed, the runs' attempts counted on, paused runs
//     waiting for a promotion (Scheduler.Resume, Pruner.Resume).
//
// A Scheduler is not safe for concurrent use: one goroutine, or one mutex,
// drives it. The pack.Allocator under it is its own.
package schedule

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
)

// Defaults of the zero Config.
const (
	DefaultBackfillWait  = time.Minute
	DefaultSettleTimeout = 2 * time.Minute
)

// maxWave bounds the first wave: the runs of one request that fit a node
// are counted up to it.
const maxWave = 1 << 14

// autoMargin is what gpu_mem=auto adds to the peak it measured: a tenth,
// at least 512 MiB, for what a later run of the same shape may use more.
func autoMargin(peak uint64) uint64 { return max(peak/10, 512<<20) }

// Config is the policy's settings. The zero Config places nothing (no
// Topology), and so needs Parallel.
type Config struct {
	// Topology is what runs are placed on; the zero Topology places
	// nothing, and then runs may ask for the zero Request only.
	Topology pack.Topology
	// Request is the sweep's default request: the first wave is counted
	// in it. It must fit the Topology.
	Request pack.Request
	// Parallel is the most runs at once. Zero means as many as fit, and
	// needs a Topology.
	Parallel int
	// BackfillWait: see the package rules. Zero means
	// DefaultBackfillWait, negative strictly in order.
	BackfillWait time.Duration
	// Window, if positive, is the most runs the queue holds waiting (see
	// Room); zero means four a lane, at least 256.
	Window int
	// Stagger spaces the first wave's starts.
	Stagger time.Duration
	// MinStartInterval is the least time between any two starts (Began),
	// retries in place included (Turn).
	MinStartInterval time.Duration
	// SettleTimeout bounds the readiness gate; zero means
	// DefaultSettleTimeout.
	SettleTimeout time.Duration
	// Measured says the caller measures runs (a sampler): without it
	// gpu_mem=auto cannot be asked for, and runs sharing a GPU by memory
	// have no readiness gate.
	Measured bool
	// Retries is the retry budget of every failure class Retry does not
	// name, except host-oom and not-found (none); interrupted attempts are
	// never retried.
	Retries int
	// Retry is the budget by failure class.
	Retry map[failure.Class]int
	// RetryBackoff is the wait before a run's first retry in place; each
	// later one waits twice the one before, up to a minute (or
	// RetryBackoff, if longer).
	RetryBackoff time.Duration
	// MaxFailures stops starting once that many runs have failed; 0: never.
	MaxFailures int
	// DensityMargin and DensityWindow are the density rule's (gpus=auto):
	// zero means DefaultDensityMargin and DefaultDensityWindow.
	DensityMargin float64
	DensityWindow time.Duration
}

// DensityStart is where a shape's density starts: its runs per GPU, and
// whether the rule was done with it.
type DensityStart struct {
	Level int
	Final bool
}

// Key names a run in a Scheduler: Add gives them out from 0, in order.
type Key int

// Start is the decision to start run Key in Lane on Assignment now.
type Start struct {
	Key   Key
	Lane  int
	Place pack.Assignment
}

// Plan is what Next decided.
type Plan struct {
	// Starts are the runs to start now, in order.
	Starts []Start
	// Wake is when Next has something to decide without any other event
	// (a stagger step, a gate's timeout, a deadline); zero: nothing.
	Wake time.Time
	// Drain says the drain deadline has come: nothing starts any more.
	Drain bool
	// Terminate says the terminate deadline has come: stop the runs.
	Terminate bool
	// Densities are the density rule's decisions since the last Next.
	Densities []DensityChange
}

// RunError is a run that Next refused, because what is left of the node
// (after GPU faults) can never serve it.
type RunError struct {
	Key Key
	Err error
}

// Error returns Err's message.
func (e *RunError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RunError) Unwrap() error { return e.Err }

// Outcome is how an attempt ended, as far as the policy cares.
type Outcome int

const (
	Succeeded   Outcome = iota // exit status 0
	Failed                     // failed or timed out: may be retried
	Interrupted                // the sweep stopped it: never retried
)

// End is how one attempt of a placed run ended.
type End struct {
	Outcome Outcome
	Class   failure.Class // the failure class of a Failed attempt
	Attempt int           // this sweep's attempts of the run so far, this one included
	// Peak is the GPU memory its processes were measured to use at most,
	// for gpu_mem=auto when the attempt ended before it settled.
	Peak uint64
	// NoRetry: the sweep is stopping, so no retry.
	NoRetry bool
}

// After is what follows an attempt's end.
type After struct {
	// Retry: another attempt follows. With Anew, the run gave its place
	// back and waits at the queue's head to start again (a Start of the
	// same Key); else it keeps its place and starts again at At.
	Retry bool
	Anew  bool
	At    time.Time
	// Halt: this failure reached MaxFailures; nothing starts any more.
	Halt bool
	// Held is what the run held at the attempt's end (gpu_mem=auto may
	// have shrunk it since its Start).
	Held pack.Assignment
}

// Scheduler is the policy's state. See the package documentation.
type Scheduler struct {
	cfg      Config
	alloc    *pack.Allocator // nil without a Topology
	queue    *pack.Queue[*waiting]
	window   int
	start    time.Time
	parallel int
	settle   time.Duration

	wave, launched int

	lanes   []bool
	used    int
	placed  map[Key]*placement
	gates   map[Key]*placement // placements whose gate or measurement waits
	holds   map[string]int     // GPU UUID → gates holding it
	learned map[string]uint64  // shape → GPU memory, margin included
	relearn bool
	faults  map[string]bool

	dens         map[string]*density           // shape → the density rule's state
	onGPU        map[string]map[Key]*placement // GPU UUID → the gpus=auto runs on it
	unmeasurable map[string]bool               // shapes whose gpu_mem=auto probe measured nothing
	pending      []DensityChange               // decisions for the next Plan
	resumed      map[string]DensityStart       // where earlier sessions left each shape (Resume)

	// turn is the run whose start holds MinStartInterval's turn, while
	// turnHeld; nextStart is when the next start may be.
	turn      Key
	turnHeld  bool
	nextStart time.Time

	failed   int
	stopped  bool // MaxFailures
	halted   bool // Stop
	draining bool
	drainAt  time.Time
	termAt   time.Time
	nextKey  Key
}

// waiting is a run between its arrival and its last attempt's end.
type waiting struct {
	key        Key
	asked      pack.Request
	shape      string
	grown      *pack.Request // the request a retry placed anew asks for
	failedWith map[failure.Class]int
}

// placement is a run that holds resources.
type placement struct {
	w        *waiting
	lane     int
	as       pack.Assignment
	probe    bool // gpu_mem=auto, not measured yet: it has its GPU alone
	learned  bool
	gated    bool // holds its GPU until its memory settles
	gateOpen bool
	attempt  int       // the attempt Started last
	anew     bool      // its last end's retry is placed anew, at Release
	settleBy time.Time // the gate's timeout; zero when no gate waits
	win      window    // gpus=auto: its progress reading under way
}

// New returns a Scheduler for cfg whose sweep starts at now.
func New(cfg Config, now time.Time) (*Scheduler, error) {
	placed := len(cfg.Topology.CPUs) > 0 || len(cfg.Topology.GPUs) > 0
	parallel := cfg.Parallel
	switch {
	case parallel < 0:
		return nil, fmt.Errorf("schedule: parallel %d: must not be negative", parallel)
	case parallel == 0 && !placed:
		return nil, errors.New("schedule: parallel 0 needs a topology to bound the runs")
	case parallel == 0:
		parallel = int(^uint(0) >> 1)
	}
	for c, n := range cfg.Retry {
		if c == failure.Interrupted || n < 0 {
			return nil, fmt.Errorf("schedule: retry %s=%d: want a class other than interrupted and a count of at least 0", c, n)
		}
	}
	s := &Scheduler{
		cfg:      cfg,
		start:    now,
		parallel: parallel,
		settle:   cfg.SettleTimeout,
		placed:   map[Key]*placement{},
		gates:    map[Key]*placement{},
		holds:    map[string]int{},
		learned:  map[string]uint64{},
		faults:   map[string]bool{},
		dens:     map[string]*density{},
		onGPU:    map[string]map[Key]*placement{},

		unmeasurable: map[string]bool{},
	}
	if s.settle <= 0 {
		s.settle = DefaultSettleTimeout
	}
	s.wave = parallel
	if placed {
		if err := cfg.Topology.Validate(); err != nil {
			return nil, fmt.Errorf("schedule: %w", err)
		}
		s.alloc = pack.NewAllocator(cfg.Topology)
		if err := s.alloc.Check(cfg.Request); err != nil {
			return nil, fmt.Errorf("schedule: request %w", err)
		}
		s.wave = min(parallel, fitting(cfg.Topology, cfg.Request, maxWave))
		if cfg.Parallel == 0 {
			s.alloc.LimitBare(len(cfg.Topology.CPUs))
		}
		if cfg.Stagger > 0 && s.wave > 1 {
			s.alloc.Spread(true)
		}
	} else if cfg.Request != (pack.Request{}) {
		return nil, fmt.Errorf("schedule: request %v: there is no topology to place it on", cfg.Request)
	}
	if cfg.Request.AutoGPUMem && !cfg.Measured {
		return nil, errors.New("schedule: gpu_mem=auto needs the runs measured")
	}
	// The queue looks ahead four runs a lane for backfilling, and no
	// further than 65,536: a sweep of ten million runs with a million
	// lanes must not hold millions of runs.
	s.window = max(256, 4*min(s.wave, 1<<14))
	if cfg.Window > 0 {
		s.window = cfg.Window
	}
	wait := cfg.BackfillWait
	switch {
	case wait == 0:
		wait = DefaultBackfillWait
	case wait < 0:
		wait = 0
	}
	s.queue = pack.NewQueue[*waiting](s.alloc, wait)
	return s, nil
}

// fitting counts the runs asking for r that fit the empty topology t at
// once, up to limit; a gpu_mem=auto run counts as the GPU of its own it
// has until it is measured.
func fitting(t pack.Topology, r pack.Request, limit int) int {
	if r.AutoGPUMem || r.AutoShare {
		r.AutoGPUMem, r.AutoShare, r.GPUShare = false, false, pack.GPUWhole
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

// digits finds the numbers in a command, which runs of one shape differ in.
var digits = regexp.MustCompile(`[0-9]+`)

// Shape names what gpu_mem=auto measures once for all runs of the
// command args: the command with every number blanked out.
func Shape(args []string) string {
	return digits.ReplaceAllString(strings.Join(args, "\x00"), "#")
}

// Add queues a run that asks for req; shape names the runs that share a
// gpu_mem=auto measurement (runs of one Shape use the same). A run that
// can never fit the node is an error, and is not queued.
func (s *Scheduler) Add(req pack.Request, shape string) (Key, error) {
	switch {
	case s.alloc == nil && req != (pack.Request{}):
		return 0, fmt.Errorf("asks for %v, and there is no topology to place it on", req)
	case s.alloc != nil:
		if err := s.alloc.Check(req); err != nil {
			return 0, err
		}
	}
	if req.AutoGPUMem && !s.cfg.Measured {
		return 0, errors.New("asks for gpu_mem=auto, which needs the runs measured")
	}
	w := &waiting{key: s.nextKey, asked: req}
	s.nextKey++
	if req.AutoGPUMem || req.AutoShare {
		w.shape = shape
	}
	s.queue.Push(w, s.resolve(w))
	return w.key, nil
}

// Room reports whether the queue takes more runs: it looks ahead a
// bounded window, so a source of millions is read as runs start.
func (s *Scheduler) Room() bool { return s.queue.Len() < s.window }

// Waiting returns how many runs wait to start.
func (s *Scheduler) Waiting() int { return s.queue.Len() }

// Placed returns how many runs hold a place: from their Start to their
// last attempt's end.
func (s *Scheduler) Placed() int { return len(s.placed) }

// Lanes returns how many lanes were used: the highest lane + 1.
func (s *Scheduler) Lanes() int { return s.used }

// Assignment returns what run k holds now (gpu_mem=auto may have shrunk
// it).
func (s *Scheduler) Assignment(k Key) pack.Assignment {
	if p := s.placed[k]; p != nil {
		return p.as
	}
	return pack.Assignment{}
}

// resolve is what w asks the allocator for: a retry's grown request, or a
// gpu_mem=auto request made concrete — the memory its shape was measured
// to use, or, before that, its GPU alone, to be measured.
func (s *Scheduler) resolve(w *waiting) pack.Request {
	if w.grown != nil {
		return *w.grown
	}
	r := w.asked
	if r.AutoShare {
		r.AutoShare, r.GPUShare = false, s.share(w.shape)
	}
	if !r.AutoGPUMem {
		return r
	}
	r.AutoGPUMem = false
	if mem, ok := s.learned[w.shape]; ok {
		r.GPUMem = mem
		return r
	}
	if !w.asked.AutoShare || !s.unmeasurable[w.shape] {
		r.GPUShare = pack.GPUWhole // measured alone first
	}
	return r
}

// Next decides what starts at now. Its error is a *RunError for a run the
// node can no longer serve (after GPU faults): that run is dropped.
func (s *Scheduler) Next(now time.Time) (Plan, error) {
	var plan Plan
	s.deadlines(now, &plan)
	plan.Densities = append(s.pending, s.densities(now)...)
	s.pending = nil
	for k, p := range s.gates {
		if !p.settleBy.IsZero() && !now.Before(p.settleBy) {
			s.open(k, p)
		}
	}
	if s.relearn {
		s.relearn = false
		s.queue.Update(func(w *waiting, r pack.Request) pack.Request {
			if (w.asked.AutoGPUMem || w.asked.AutoShare) && w.grown == nil {
				return s.resolve(w)
			}
			return r
		})
	}
	err := s.starts(now, &plan)
	s.wake(now, &plan)
	return plan, err
}

// deadlines marks plan and the scheduler at the drain and terminate
// deadlines.
func (s *Scheduler) deadlines(now time.Time, plan *Plan) {
	if !s.termAt.IsZero() && !now.Before(s.termAt) {
		plan.Terminate = true
		s.draining = true
	}
	if !s.drainAt.IsZero() && !now.Before(s.drainAt) {
		s.draining = true
	}
	plan.Drain = s.draining
}

// starts places the runs that start at now into plan.Starts.
func (s *Scheduler) starts(now time.Time, plan *Plan) error {
	for !s.draining && !s.stopped && !s.halted && s.queue.Len() > 0 && s.mayTakeTurn(now) {
		lane, opens := s.freeLane(now)
		if lane < 0 {
			if !opens.IsZero() {
				plan.Wake = opens // a free lane the stagger opens then
			}
			return nil
		}
		w, as, err := s.queue.Next(now)
		if errors.Is(err, pack.ErrBusy) {
			return nil
		}
		if err != nil {
			return &RunError{Key: w.key, Err: err}
		}
		plan.Starts = append(plan.Starts, Start{Key: w.key, Lane: lane, Place: as})
		s.place(lane, w, as)
		if s.launched++; s.launched == s.wave && s.cfg.Stagger > 0 && s.alloc != nil {
			s.alloc.Spread(false) // the first wave is out: pack as usual
		}
		if s.cfg.MinStartInterval > 0 {
			s.turn, s.turnHeld = w.key, true // one start at a time, until it Began
		}
	}
	return nil
}

// mayTakeTurn reports whether a start may be handed out at now under
// MinStartInterval: no start holds the turn, and the interval since the
// last one began has passed.
func (s *Scheduler) mayTakeTurn(now time.Time) bool {
	return s.cfg.MinStartInterval <= 0 || !s.turnHeld && !now.Before(s.nextStart)
}

// wake sets plan.Wake to the soonest time after now that something is
// due: a free lane the stagger opens (set by starts), a gate's timeout, a
// deadline, the next start MinStartInterval allows.
func (s *Scheduler) wake(now time.Time, plan *Plan) {
	soonest := func(t time.Time) {
		if !t.IsZero() && t.After(now) && (plan.Wake.IsZero() || t.Before(plan.Wake)) {
			plan.Wake = t
		}
	}
	for _, p := range s.gates {
		soonest(p.settleBy)
	}
	soonest(s.drainAt)
	soonest(s.termAt)
	if s.cfg.MinStartInterval > 0 && !s.turnHeld && s.queue.Len() > 0 {
		soonest(s.nextStart)
	}
}

// Began says an attempt of run k began at now (its process starts, or
// fails to): under MinStartInterval, the next start may be at now plus
// the interval, and k gives back the turn it held. The caller wakes the
// loop that asks Next.
func (s *Scheduler) Began(k Key, now time.Time) {
	if s.cfg.MinStartInterval <= 0 {
		return
	}
	s.nextStart = now.Add(s.cfg.MinStartInterval)
	s.freeTurn(k)
}

// Turn asks, under MinStartInterval, for the turn of a retry of run k in
// its place: ok when k may start at now (it then holds the turn until it
// Began, or ends); else at is when to ask again. Without the interval, ok
// at once.
func (s *Scheduler) Turn(k Key, now time.Time) (at time.Time, ok bool) {
	if s.cfg.MinStartInterval <= 0 || s.turnHeld && s.turn == k {
		return now, true
	}
	switch {
	case s.turnHeld:
		return now.Add(s.cfg.MinStartInterval), false // another start holds it: it begins well before
	case now.Before(s.nextStart):
		return s.nextStart, false
	}
	s.turn, s.turnHeld = k, true
	return now, true
}

// freeTurn gives back the turn if k holds it.
func (s *Scheduler) freeTurn(k Key) {
	if s.turnHeld && s.turn == k {
		s.turnHeld = false
	}
}

// laneOpens is when lane i opens under the stagger: lane k of the first
// wave k×Stagger after the sweep's start, the lanes past the wave with
// its last; the zero time without a stagger.
func (s *Scheduler) laneOpens(i int) time.Time {
	if s.cfg.Stagger <= 0 {
		return time.Time{}
	}
	return s.start.Add(time.Duration(min(i, max(s.wave-1, 0))) * s.cfg.Stagger)
}

// freeLane returns the lowest lane that is free and open at now, or -1
// (Parallel are busy, or the free ones are not open yet); then opens is
// when the first free lane that is not open yet opens (zero: none).
func (s *Scheduler) freeLane(now time.Time) (lane int, opens time.Time) {
	for i := range min(len(s.lanes)+1, s.parallel) {
		if i < len(s.lanes) && s.lanes[i] {
			continue
		}
		at := s.laneOpens(i)
		if !now.Before(at) {
			return i, time.Time{}
		}
		if opens.IsZero() || at.Before(opens) {
			opens = at
		}
	}
	return -1, opens
}

// place records run w in lane on as; a run sharing its GPU by memory
// holds the GPU for its gate, where runs are measured.
func (s *Scheduler) place(lane int, w *waiting, as pack.Assignment) {
	if lane == len(s.lanes) {
		s.lanes = append(s.lanes, false)
	}
	s.lanes[lane] = true
	s.used = max(s.used, lane+1)
	p := &placement{w: w, lane: lane, as: as,
		probe: w.asked.AutoGPUMem && w.grown == nil && as.Request.GPUShare == pack.GPUWhole && as.Request.GPUMem == 0 && !s.unmeasurable[w.shape]}
	if as.SharedGPUs && as.Request.GPUMem > 0 && s.cfg.Measured {
		p.gated = true
		s.hold(as.GPUs[0].UUID)
	}
	s.placed[w.key] = p
	s.join(w.key, p)
}

func (s *Scheduler) hold(uuid string) {
	if s.holds[uuid]++; s.holds[uuid] == 1 {
		s.alloc.Hold(uuid)
	}
}

func (s *Scheduler) unhold(uuid string) {
	if s.holds[uuid]--; s.holds[uuid] <= 0 {
		s.alloc.Unhold(uuid)
		delete(s.holds, uuid)
	}
}

// Started says attempt n of run k has started at now. It reports whether
// the caller should tell Settled when the attempt's GPU memory settles:
// the attempt holds its GPU for the gate, or measures its shape. The
// gate's timeout runs from now.
func (s *Scheduler) Started(k Key, attempt int, now time.Time) (watch bool) {
	p := s.placed[k]
	if p == nil {
		return false
	}
	p.attempt = attempt
	if !p.gated && !(p.probe && !p.learned) {
		return false
	}
	if p.gated && p.gateOpen {
		p.gateOpen = false // a later attempt starts afresh: hold the GPU again
		s.hold(p.as.GPUs[0].UUID)
	}
	p.settleBy = now.Add(s.settle)
	s.gates[k] = p
	return true
}

// Settled says attempt n of run k saw its GPU memory settle at peak: its
// gate opens, and a run measured for gpu_mem=auto teaches its shape. A
// report for another attempt than the running one is ignored.
func (s *Scheduler) Settled(k Key, attempt int, peak uint64) {
	p := s.placed[k]
	if p == nil || p.attempt != attempt {
		return
	}
	if p.probe && !p.learned {
		s.learn(p, peak)
	}
	s.open(k, p)
}

// open opens p's gate: its GPU takes new runs again.
func (s *Scheduler) open(k Key, p *placement) {
	if p.gated && !p.gateOpen {
		p.gateOpen = true
		s.unhold(p.as.GPUs[0].UUID)
	}
	p.settleBy = time.Time{}
	delete(s.gates, k)
}

// learn records what a run measured for gpu_mem=auto used and lets it
// claim just that. A peak of 0 (the GPU could not tell whose memory it
// was) teaches nothing: the shape's runs keep a GPU each.
func (s *Scheduler) learn(p *placement, peak uint64) {
	if peak == 0 {
		if p.w.asked.AutoShare {
			// gpus=auto goes on by progress alone, without a memory claim.
			s.unmeasurable[p.w.shape], s.relearn = true, true
		}
		return
	}
	p.learned = true
	mem := max(peak+autoMargin(peak), s.learned[p.w.shape])
	s.learned[p.w.shape] = mem
	s.relearn = true
	if g := p.as.GPUs[0].MemoryBytes; p.w.asked.AutoShare && g > pack.GPUMemHeadroom(g) {
		d := s.densityOf(p.w.shape) // never more runs than the memory holds
		d.most = max(min(d.most, int((g-pack.GPUMemHeadroom(g))/mem)), 1)
	}
	if as, err := s.alloc.Resize(p.as, s.resolve(p.w)); err == nil {
		p.as = as
	}
}

// Ended says an attempt of run k ended at now, and decides what follows:
// a retry here, a retry placed anew, or the run's end. The run keeps its
// place until Release, so that the caller reports the end before another
// run can take it; a retry here keeps it.
func (s *Scheduler) Ended(k Key, e End, now time.Time) After {
	s.freeTurn(k) // an attempt that ended without beginning
	p := s.placed[k]
	if p == nil {
		return After{}
	}
	if p.probe && !p.learned {
		s.learn(p, e.Peak) // it ended before its memory settled
	}
	after := After{Held: p.as}
	if e.Outcome == Failed {
		if c := s.outOfMemory(p, e.Class, now); c != nil {
			s.pending = append(s.pending, *c)
		}
		w := p.w
		if w.failedWith == nil {
			w.failedWith = map[failure.Class]int{}
		}
		w.failedWith[e.Class]++
		budget := s.budget(e.Class)
		if e.Class == failure.GPUError && s.faulted(p.as) {
			budget = max(budget, 1) // its GPU failed, not the run: once more, elsewhere
		}
		after.Retry = w.failedWith[e.Class] <= budget && !e.NoRetry && !s.stopped && !s.halted
		if !after.Retry {
			s.failed++
			if s.cfg.MaxFailures > 0 && s.failed >= s.cfg.MaxFailures && !s.stopped {
				s.stopped, after.Halt = true, true
			}
		}
	}
	if after.Retry {
		if more, ok := s.anew(p, e.Class); ok {
			p.w.grown, p.anew = &more, true
			after.Anew = true
			return after
		}
		after.At = now.Add(s.backoff(e.Attempt))
	}
	return after
}

// Release gives back what run k holds: after its last attempt's end, after
// an end whose retry is placed anew (the run then waits at the queue's
// head, for a later Start), or when the caller gives up on it (an attempt
// that could not start because the sweep stopped).
func (s *Scheduler) Release(k Key) {
	s.freeTurn(k)
	p := s.placed[k]
	if p == nil {
		return
	}
	if p.gated && !p.gateOpen {
		s.unhold(p.as.GPUs[0].UUID)
	}
	delete(s.gates, k)
	s.leave(k, p)
	if s.alloc != nil {
		s.alloc.Release(p.as)
	}
	s.lanes[p.lane] = false
	delete(s.placed, k)
	if p.anew {
		s.queue.PushFront(p.w, *p.w.grown)
	}
}

// budget is how many attempts of a run may fail with class c before it
// is given up.
func (s *Scheduler) budget(c failure.Class) int {
	if n, ok := s.cfg.Retry[c]; ok {
		return n
	}
	switch c {
	case failure.HostOOM, failure.NotFound, failure.Interrupted:
		return 0
	}
	return s.cfg.Retries
}

// backoff is the wait before the retry after attempt n: RetryBackoff
// doubled for each attempt before, up to a minute (or RetryBackoff).
func (s *Scheduler) backoff(n int) time.Duration {
	limit := max(time.Minute, s.cfg.RetryBackoff)
	wait := s.cfg.RetryBackoff
	for i := 1; i < n && wait < limit; i++ {
		wait *= 2
	}
	return min(wait, limit)
}

// anew returns what p asks for when its retry after a failure of class c
// is placed anew: more GPU memory after a cuda-oom or a gpu-mem, more host memory after
// a host-oom, the same on another GPU after its GPU faulted. false: the
// retry keeps its place.
func (s *Scheduler) anew(p *placement, c failure.Class) (pack.Request, bool) {
	if s.alloc == nil {
		return pack.Request{}, false
	}
	as := p.as
	switch {
	case (c == failure.CUDAOOM || c == failure.GPUMem) && len(as.GPUs) > 0:
		more := pack.MoreGPUMemory(as.Request, as.GPUs[0].MemoryBytes)
		if more == as.Request || s.alloc.Check(more) != nil {
			return pack.Request{}, false // as much as it can get: retried where it is
		}
		return more, true
	case c == failure.HostOOM && as.Request.Mem > 0:
		more := as.Request
		more.Mem += more.Mem / 2
		if s.alloc.Check(more) != nil {
			return pack.Request{}, false // as much as the node has
		}
		return more, true
	case c == failure.GPUError && s.faulted(as):
		return as.Request, true
	}
	return pack.Request{}, false
}

// Fault says the GPU uuid reported a fault: it is retired with its MIG
// devices for the rest of the sweep. It reports whether that retired a GPU
// of the node not retired before, and whether none is left, which drains
// the sweep.
func (s *Scheduler) Fault(uuid string) (retired, none bool) {
	if s.alloc == nil {
		return false, false
	}
	retired, none = s.alloc.Retire(uuid)
	if retired {
		s.faults[uuid] = true
		if none {
			s.draining = true
		}
	}
	return retired, none
}

// Faulted reports whether a GPU run k holds (or the GPU a MIG device of it
// is part of) was retired after a fault.
func (s *Scheduler) Faulted(k Key) bool {
	p := s.placed[k]
	return p != nil && s.faulted(p.as)
}

func (s *Scheduler) faulted(as pack.Assignment) bool {
	for _, g := range as.GPUs {
		if s.faults[g.UUID] || g.Parent != "" && s.faults[g.Parent] {
			return true
		}
	}
	return false
}

// SetDeadlines sets the deadlines, the only way to: nothing starts at or
// after drainAt, and at terminateAt Next says Terminate. Zero means never
// (a new Scheduler has none). Called again, it moves them: a deadline
// that has passed already did what it does, and moving it undoes nothing.
func (s *Scheduler) SetDeadlines(drainAt, terminateAt time.Time) {
	s.drainAt, s.termAt = drainAt, terminateAt
}

// MayStart reports whether a start may still go ahead at now: the sweep is
// not draining (the drain deadline, no GPU left) and MaxFailures has not
// stopped it. The caller asks it at the very moment of a start.
func (s *Scheduler) MayStart(now time.Time) bool {
	if !s.drainAt.IsZero() && !now.Before(s.drainAt) {
		s.draining = true
	}
	return !s.draining && !s.stopped && !s.halted
}

// Stop says the caller stops starting runs (a cancellation, a kill, a
// drain of its own): Next starts nothing more, and deadlines and gates go
// on.
func (s *Scheduler) Stop() { s.halted = true }

// Draining reports whether the sweep drains: the drain deadline came or no
// GPU is left.
func (s *Scheduler) Draining() bool { return s.draining }
