package runner

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/claim"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/sweep"
)

// DefaultLease is how long a pool task's heartbeat may stand still before
// the other tasks take its claims over (Options.Lease): long beside a
// shared file system's attribute caches (NFS holds them up to a minute)
// and its clients' pauses, short beside a sweep.
const DefaultLease = 3 * time.Minute

// The shared pool (Options.Pool). Every task of a submission runs one
// nodepack on its node into the same output directory; each claims the
// next runs of the whole sweep as its lanes free (runner/claim: a file
// linked per claim, no server, no lock; schedule.ClaimSize says how
// many), runs them with its own ledger (ledger.PoolFileName), and renews
// a lease. A task with nothing left to claim watches the others' leases:
// the claims of a task whose lease expired are taken over and their runs
// that did not end are run again; a task whose claim was taken stops its
// runs of it (fencing: Options.Fenced, Execution.Fence). The readers fold
// the tasks' ledgers as one sweep (ledger.ReadDir keeps each run's best
// record).

// poolTask is the name of this task in the pool: spec, or for "auto" the
// batch job's (its array task's, and its rank in a step), else this host
// and process.
func poolTask(spec string, job batch.Job) (string, error) {
	if spec != "auto" {
		if !taskName(spec) {
			return "", fmt.Errorf("pool task %q: a name of letters, digits, '.', '-' and '_', at most 100, not starting with '.'", spec)
		}
		return spec, nil
	}
	name := batch.Label(job, false)
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	} else if job.Tasks != nil && job.Tasks.Count > 1 {
		name += "." + strconv.Itoa(job.Tasks.Rank)
	}
	// A PBS array element's id ("123[4].server") as a file name.
	name = strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return r
		}
		return '_'
	}, name)
	if !taskName(name) {
		return "", fmt.Errorf("pool task auto: %q is no task name: give one", name)
	}
	return name, nil
}

// taskName reports whether name may name a pool task: its ledger's and
// its lease's file names.
func taskName(name string) bool {
	if name == "" || len(name) > 100 || name[0] == '.' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// owned is a claim this task owns, and how far its runs were handed on.
type owned struct {
	c    claim.Claim
	upto int // runs from c.From to upto-1 were handed on (or found done)
}

// poolRuns is the run source of a pool task: the runs of its claims, old
// and new, and of the claims it takes over, each once.
type poolRuns struct {
	s       *Sweep
	pool    *claim.Pool
	lanes   int
	lease   time.Duration
	beat    time.Duration
	running atomic.Int64 // the task's running attempts, from its events
	note    func(string)
	// The holder's side of the lease (claim.StopBy): ladder is how long
	// its runs take to stop (a grace, two with a checkpoint signal);
	// cache how late another task may see a change; t0 the clock's origin
	// for safe.
	ladder, grace time.Duration
	sig           syscall.Signal
	cache         time.Duration
	t0            time.Time
	// safe is until when (nanoseconds from t0, this task's monotonic
	// clock) a run may start or end as this task's: a little before its
	// runs must be gone, its last renewal's StopBy less their stop.
	safe atomic.Int64
	// late: a renewal came after the stop the one before it set (the
	// lapse timer, or the supervisor, may have stopped the runs): as
	// lapsed until lapsing says so under mu.
	late    atomic.Bool
	lapse   *time.Timer   // fires at safe: the runs stop (lapsed)
	guard   string        // the runs' name to the supervisor (execute.Options.Guard)
	io      sync.Mutex    // the claims folder's I/O (pool); taken after mu, never before
	stop    chan struct{} // closed when the session ends
	changed chan struct{} // a takeover: the feeder's next pass has work
	settled chan struct{} // the runs it handed on all ended: await looks again

	mu        sync.Mutex
	mine      []*owned       // sorted by c.From
	frontier  int            // the first run no claim this task saw covers
	exhausted bool           // every run is claimed
	given     map[string]int // runs handed on and not ended for good, by id: their claim's From
	lost      map[int]bool   // claims taken from this task, by From
	ran       bool           // it handed on a run (or owned a claim)
	said      claim.State    // what its heartbeat says now
	// cleared holds the dead tasks seen to own no claim any more: their
	// claims are not looked for again while they stay dead.
	cleared map[string]bool
	err     error // the claims folder failed: no more runs start
	fence   func(lost func(id string) bool)
	// lapsed: safe passed before a renewal moved it, and the runs were
	// stopped; until recheck (a renewal, then the caches' time twice over,
	// for another task's takeover to show) no run starts, and then the
	// runs in again whose claims are still this task's are handed on again.
	lapsed  bool
	recheck time.Time
	again   map[string]bool
	// hidden: until then the next claim is not looked at, another task's
	// that this node's cache hides (claim.ErrHidden); zero for none.
	hidden time.Time
	// doneSeen: when this task first saw each task done; orphanChecked:
	// the done tasks whose claims orphans judged.
	doneSeen      map[string]time.Time
	orphanChecked map[string]bool
	skip          func(id string) bool
	counts        func() ledger.ResumeCounts
}

func newPoolRuns(s *Sweep, pool *claim.Pool, skip func(string) bool, counts func() ledger.ResumeCounts) *poolRuns {
	lease := s.lease
	if lease <= 0 {
		lease = DefaultLease
	}
	grace, ladder := stopLadder(s.opts.Execute)
	cache := s.cache.Time
	if !s.cache.Known {
		cache = lease / 3 // the most a lease allows: the cautious guess
	}
	p := &poolRuns{s: s, pool: pool, lease: lease, beat: claim.Beat(lease),
		ladder: ladder, grace: grace, sig: s.opts.Execute.CheckpointSignal, cache: cache, t0: time.Now(),
		stop: make(chan struct{}), changed: make(chan struct{}, 1), settled: make(chan struct{}, 1),
		given: map[string]int{}, lost: map[int]bool{}, cleared: map[string]bool{}, again: map[string]bool{},
		doneSeen: map[string]time.Time{}, orphanChecked: map[string]bool{},
		skip: skip, counts: counts}
	p.guard = fmt.Sprintf("pool:%s:%d", s.pool, guards.Add(1))
	p.lapse = time.AfterFunc(time.Hour, func() { p.lapsing(false) })
	p.lapse.Stop()
	return p
}

// guards numbers the pools of this process, for their guards' names.
var guards atomic.Int64

// stopLadder is how long a run takes to stop: its grace, and the whole
// ladder, a grace more for a checkpoint asked first.
func stopLadder(o execute.Options) (grace, ladder time.Duration) {
	grace = o.GracePeriod()
	if o.CheckpointSignal != 0 {
		return grace, 2 * grace
	}
	return grace, grace
}

// renewed arms the holder's side of the lease after a renewal that began
// at start: this task starts and ends runs as its own until a little
// before claim.StopBy less their stop, when it stops them itself (lapse);
// the supervisor stops them at that time if this process cannot (frozen,
// or hung on the mount). It reports whether the renewal came too late:
// after the stop the last one set (a slow mount, a starved process), so
// that the runs may have been stopped already.
func (p *poolRuns) renewed(start time.Time) (late bool) {
	if late = p.safe.Load() > 0 && !p.isSafe(); late {
		p.late.Store(true) // before safe moves on: no run ends as done meanwhile
	}
	stopAt := claim.StopBy(start, p.lease).Add(-p.ladder)
	// The process's own stop comes first, by a little, so that the
	// supervisor acts only for a process that cannot.
	own := stopAt.Add(-min(p.beat/4, 250*time.Millisecond))
	p.safe.Store(int64(own.Sub(p.t0)))
	p.lapse.Reset(time.Until(own))
	proc.StopBy(p.guard, stopAt, p.sig, p.grace)
	return late
}

// isSafe reports whether a run may start or end as this task's now.
func (p *poolRuns) isSafe() bool { return int64(time.Since(p.t0)) < p.safe.Load() }

// lapsing is the lapse timer's, and a late renewal's (late): the lease
// was not renewed in time, so the runs stop now, as the other tasks may
// soon take the claims over.
func (p *poolRuns) lapsing(late bool) {
	if !late && p.isSafe() {
		return // renewed meanwhile
	}
	p.mu.Lock()
	defer p.late.Store(false) // lapsed, under mu, from here on
	if p.lapsed || len(p.given) == 0 && p.fence == nil {
		p.lapsed = p.lapsed || p.fence != nil
		p.mu.Unlock()
		return
	}
	p.lapsed, p.recheck = true, time.Time{}
	fence, n := p.fence, len(p.given)
	p.mu.Unlock()
	if n > 0 {
		p.note(fmt.Sprintf("pool: this task's lease was not renewed for %v (a frozen task, a hung or failing mount): its runs stop now, before another task may take them over, and run again here if their claims are still this task's", p.lease/2-p.ladder))
	}
	if fence != nil {
		fence(func(id string) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			_, ok := p.given[id]
			return ok
		})
	}
}

// adopt makes the claims this task owns (a requeued task's, from before)
// its own again.
func (p *poolRuns) adopt() error {
	all, err := p.pool.Claims()
	if err != nil {
		return err
	}
	for _, c := range all {
		if c.Task == p.s.pool {
			p.mine = append(p.mine, &owned{c: c, upto: c.From})
			p.ran = true
		}
	}
	return nil
}

// runs streams the runs of this task's claims, claiming as lanes take
// them, then of the claims it takes over, until nothing is left.
func (p *poolRuns) runs() iter.Seq2[run.Run, error] {
	return func(yield func(run.Run, error) bool) {
		for {
			more, ok := p.pass(yield)
			if !ok {
				return
			}
			if more {
				continue
			}
			if !p.await() {
				p.mu.Lock()
				err := p.err
				p.mu.Unlock()
				if err != nil {
					yield(run.Run{}, err)
				}
				return
			}
		}
	}
}

// orphans takes over the claims of the tasks that said they were done
// (they are gone) that hold a run this sweep has not done: a line edited
// since the task ran it is a new run, and no one else would run it. A
// done task's ledger is judged only once this node's cache can no longer
// hide what it wrote before it said so: the cache's time after this task
// first saw it done (pending meanwhile), and then read afresh.
func (p *poolRuns) orphans(now time.Time) (took, pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.io.Lock()
	defer p.io.Unlock()
	if p.err != nil {
		return false, false
	}
	peers, err := p.pool.Peers(now, p.lease)
	if err != nil {
		return false, false // the heartbeat meets it again
	}
	ready := map[string]bool{}
	for _, peer := range peers {
		if peer.State != claim.Done || p.orphanChecked[peer.Task] {
			continue
		}
		seen, ok := p.doneSeen[peer.Task]
		if !ok {
			seen = now
			p.doneSeen[peer.Task] = now
		}
		if wait := p.cache; wait > 0 && now.Sub(seen) < wait+p.beat {
			pending = true
			continue
		}
		ready[peer.Task] = true
		p.orphanChecked[peer.Task] = true
	}
	if len(ready) == 0 {
		return false, pending
	}
	all, err := p.pool.Claims()
	if err != nil || !slices.ContainsFunc(all, func(c claim.Claim) bool { return ready[c.Task] }) {
		return false, pending
	}
	d, err := ledger.ReadDir(p.s.output, ledger.ReadOptions{})
	if err != nil {
		p.fail(err)
		return false, false
	}
	p.skip, _ = d.ResumeFilter(p.s.opts.retries)
	need := map[int]bool{}
	i, k := -1, 0
	for range p.s.source.RunsExcept(sweep.Shard{Index: 0, Count: 1}, func(id string) bool {
		i++
		for k < len(all) && all[k].To <= i {
			k++
		}
		if k < len(all) && all[k].From <= i && ready[all[k].Task] && !p.skip(id) {
			need[all[k].From] = true
		}
		return true
	}) {
	}
	n := 0
	for _, c := range all {
		if !need[c.From] {
			continue
		}
		if got, ok, err := p.pool.TakeOver(c); err == nil && ok {
			p.mine = append(p.mine, &owned{c: got, upto: got.From})
			p.ran = true
			n++
		}
	}
	if n > 0 {
		slices.SortFunc(p.mine, func(a, b *owned) int { return a.c.From - b.c.From })
		p.note(fmt.Sprintf("pool: took over %d claims of tasks that ended, whose runs this sweep has not all done (a line edited since they ran it): their runs that are not done run here", n))
	}
	return n > 0, pending
}

// pass hands on the runs of the sweep this task owns and has not handed
// on, in the sweep's order, claiming more at the frontier while any is
// left. more says a takeover ended it early, ok false that the stream
// ends.
func (p *poolRuns) pass(yield func(run.Run, error) bool) (more, ok bool) {
	i := -1
	skip := func(id string) bool {
		i++
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.err != nil {
			return true
		}
		if !p.exhausted && i >= p.frontier {
			p.claimAt(i)
		}
		o := p.ownerOf(i)
		if o == nil || p.lost[o.c.From] {
			return true
		}
		if i < o.upto {
			if !p.lapsed && p.again[id] {
				delete(p.again, id) // stopped by a lapse, still this task's
				return false
			}
			return true
		}
		o.upto = i + 1
		if p.skip(id) {
			return true // done before
		}
		p.given[id] = o.c.From
		return false
	}
	for r, err := range p.s.source.RunsExcept(sweep.Shard{Index: 0, Count: 1}, skip) {
		if err != nil {
			yield(run.Run{}, err)
			return false, false
		}
		if !yield(r, nil) {
			return false, false
		}
		select {
		case <-p.changed:
			return true, true
		default:
		}
	}
	p.mu.Lock()
	err := p.err
	if p.frontier >= p.s.source.Total() {
		p.exhausted = true // its last claim ended at the sweep's last run
	}
	p.mu.Unlock()
	if err != nil {
		yield(run.Run{}, err)
		return false, false
	}
	return false, true
}

// claimAt claims the next runs once the pass reached i, the frontier (mu
// held).
func (p *poolRuns) claimAt(i int) {
	if !p.hidden.IsZero() && time.Now().Before(p.hidden) {
		return // the next claim is hidden by the cache: the heartbeat calls again
	}
	p.io.Lock()
	defer p.io.Unlock()
	tasks := max(p.pool.Tasks(), 1)
	free := max(p.lanes-int(p.running.Load()), 1)
	c, ok, err := p.pool.ClaimWith(func(left int) int { return schedule.ClaimSize(left, tasks, free, p.lanes) })
	switch {
	case errors.Is(err, claim.ErrHidden):
		// Another task's claim this node cannot read yet: looked at
		// again once the cache may have let it through.
		p.hidden = time.Now().Add(p.cache + p.beat)
	case err != nil:
		p.fail(err)
	case !ok:
		p.exhausted = true
	default:
		p.mine = append(p.mine, &owned{c: c, upto: c.From})
		p.frontier, p.ran = c.To, true
		p.exhausted = c.To >= p.s.source.Total()
	}
}

// fail stops the task's starts for err, the claims folder's (mu held):
// its stream ends with the error, and it does not say it is done, so
// that the others take its claims over.
func (p *poolRuns) fail(err error) {
	if p.err == nil {
		p.err = fmt.Errorf("pool: %w", err)
	}
}

// ownerOf is this task's claim that holds run i (mu held).
func (p *poolRuns) ownerOf(i int) *owned {
	k, _ := slices.BinarySearchFunc(p.mine, i, func(o *owned, i int) int {
		switch {
		case o.c.To <= i:
			return -1
		case o.c.From > i:
			return 1
		}
		return 0
	})
	if k < len(p.mine) && p.mine[k].c.From <= i && i < p.mine[k].c.To {
		return p.mine[k]
	}
	return nil
}

// ended notes that a run ended for good (or left this task, fenced).
func (p *poolRuns) ended(id string) {
	p.mu.Lock()
	delete(p.given, id)
	empty := len(p.given) == 0
	p.mu.Unlock()
	if empty {
		select {
		case p.settled <- struct{}{}:
		default:
		}
	}
}

// state is what this task says of itself in its heartbeat (mu held).
func (p *poolRuns) state() claim.State {
	if len(p.given) > 0 || !p.exhausted || p.unhanded() {
		return claim.Busy
	}
	return claim.Idle
}

// unhanded reports whether a claim this task owns has runs it has not
// handed on yet (mu held).
func (p *poolRuns) unhanded() bool {
	for _, o := range p.mine {
		if o.upto < o.c.To && !p.lost[o.c.From] {
			return true
		}
	}
	return false
}

// heartbeat renews the lease every beat, fences the runs of the claims
// taken from this task, and takes over the claims of dead tasks (busy or
// idle: a dead task's runs wait for no one's end), until the session
// ends.
func (p *poolRuns) heartbeat() {
	t := time.NewTicker(p.beat)
	defer t.Stop()
	for {
		p.tick(time.Now())
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// tick is one beat of heartbeat: renew, fence, take over, and look at a
// hidden claim again once its time came.
func (p *poolRuns) tick(now time.Time) {
	p.renew(now)
	p.mu.Lock()
	again := !p.hidden.IsZero() && !now.Before(p.hidden)
	if again {
		p.hidden = time.Time{}
	}
	p.mu.Unlock()
	if p.takeOver(now) || again {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

// renew renews the lease, fences the runs of the claims taken from this
// task, and ends a lapse. Its file I/O holds io, not mu: a hung mount
// stalls the heartbeat, not the task's events.
func (p *poolRuns) renew(now time.Time) {
	p.mu.Lock()
	st := p.state()
	// Each claim with runs given out (or to be given again) asked once.
	ask := map[int]claim.Claim{}
	for _, from := range p.given {
		if _, asked := ask[from]; asked || p.lost[from] {
			continue
		}
		if o := p.ownerOf(from); o != nil {
			ask[from] = o.c
		}
	}
	p.mu.Unlock()

	p.io.Lock()
	start := time.Now()
	err := p.pool.Renew(st)
	lost := map[int]bool{}
	late := false
	if err == nil {
		late = p.renewed(start)
		for from, c := range ask {
			if ok, err := p.pool.Owns(c); err == nil && !ok {
				lost[from] = true
			}
		}
	}
	p.io.Unlock()
	if late {
		p.lapsing(true)
	}

	p.mu.Lock()
	if err != nil {
		if p.err == nil {
			p.note(fmt.Sprintf("pool: %v: this task stops its runs in %v if it stays so, and the other tasks take its claims over once it has for %v", err, max(time.Duration(p.safe.Load())-time.Since(p.t0), 0).Round(time.Millisecond), p.lease))
		}
		p.mu.Unlock()
		return
	}
	p.said = st
	n := 0
	for from := range lost {
		if !p.lost[from] {
			p.lost[from] = true
			n++
		}
	}
	var dropped []string
	for id := range p.again {
		if from, ok := p.given[id]; !ok || p.lost[from] {
			delete(p.again, id)
			delete(p.given, id)
			dropped = append(dropped, id)
		}
	}
	back := 0
	if p.lapsed {
		switch {
		case p.recheck.IsZero():
			// Another task's takeover may hide behind a cache for that
			// long after it saw this renewal, and it made it at most that
			// long after this renewal.
			p.recheck = start.Add(2*p.cache + p.beat)
		case !start.Before(p.recheck):
			p.lapsed, back = false, len(p.again)
		}
	}
	fence := p.fence
	p.mu.Unlock()
	if len(dropped) > 0 {
		p.settle()
	}
	if back > 0 {
		p.note(fmt.Sprintf("pool: this task renews its lease again and still owns the claims of %d runs it stopped: they run again here", back))
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
	if n > 0 {
		p.note(fmt.Sprintf("pool: %d of this task's claims were taken over by another task (this one was seen dead): their runs stop here and run there", n))
		if fence != nil {
			go fence(func(id string) bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				from, ok := p.given[id]
				return ok && p.lost[from]
			})
		}
	}
}

// settle signals that the runs handed on may all have ended.
func (p *poolRuns) settle() {
	p.mu.Lock()
	empty := len(p.given) == 0
	p.mu.Unlock()
	if empty {
		select {
		case p.settled <- struct{}{}:
		default:
		}
	}
}

// fenced reports whether run id may not start, or end as done, here now
// (Options.Fenced, asked before an attempt's files, at its start and at
// its end): its claim was taken from this task, and it leaves it; or the
// lease lapsed, and it waits, to be handed on again once the claim is
// known to be still this task's. It does no file I/O: a task woken from a
// freeze learns from its own clock that its lease lapsed, before any
// read of the mount could tell it.
func (p *poolRuns) fenced(id string) bool {
	safe := p.isSafe()
	p.mu.Lock()
	from, ok := p.given[id]
	switch {
	case !ok:
		p.mu.Unlock()
		return false
	case p.lost[from]:
		delete(p.given, id)
		p.mu.Unlock()
		p.settle()
		return true
	case !safe || p.lapsed || p.late.Load():
		p.again[id] = true
		p.mu.Unlock()
		return true
	}
	p.mu.Unlock()
	return false
}

// event follows the task's events: its running attempts, and its runs
// that ended for good (or that are no longer its own).
func (p *poolRuns) event(ev run.Event) {
	switch {
	case ev.Kind == run.Started:
		p.running.Add(1)
	case ev.Kind == run.Finished:
		p.running.Add(-1)
		p.mu.Lock()
		from, ok := p.given[ev.Run.ID]
		// An interrupted run is not done: the task stays busy with it,
		// so that if it does not come back (a requeue) the others take
		// it over; unless another task took its claim.
		done := ok && !ev.Retry && (ev.Reason != run.Interrupted || p.lost[from])
		if ok && ev.Reason == run.Interrupted && !p.lost[from] && (p.lapsed || !p.isSafe()) {
			p.again[ev.Run.ID] = true // stopped for the lapse: to run again if still this task's
		}
		p.mu.Unlock()
		if done {
			p.ended(ev.Run.ID)
		}
	}
}

// idlePoll is how often a task with nothing left to run reads the
// others' leases.
const idlePoll = time.Second

// await waits, once this task has handed on every run it owns, for work
// taken over from a dead task (true, see tick) or for the end (false): the session
// stops, the claims folder fails, or no other task is left that could die
// with runs of its claims. A task that never had a run leaves at once.
func (p *poolRuns) await() bool {
	// The others' leases are read every second while this task waits
	// (every beat, if shorter), so that it leaves soon after the last
	// busy one is done.
	t := time.NewTicker(min(p.beat, idlePoll))
	defer t.Stop()
	first := true // whether a task that never had a run may leave at once is still to be judged
	for {
		took, pending := p.orphans(time.Now())
		switch {
		case took:
			return true
		case pending:
			// A done task's ledger this node's cache may still hide:
			// judged first.
		case first:
			first = false
			if p.nothingHere(time.Now()) {
				p.note(fmt.Sprintf("pool: every run of the sweep's %d is claimed by other tasks: nothing for this task", p.s.source.Total()))
				return false
			}
		case p.over(time.Now()):
			return false
		}
		select {
		case <-p.stop:
			return false
		case <-p.changed:
			return true // a takeover (see tick)
		case <-p.settled:
		case <-t.C:
		}
	}
}

// nothingHere reports whether this task, which never had a run, may
// leave at once: every task that holds claims renewed its lease within a
// lease of this one's, by the file system's clock, and not later. One that did not may
// be dead: this task stays to see, and takes its claims over if it is.
func (p *poolRuns) nothingHere(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.io.Lock()
	defer p.io.Unlock()
	if p.ran || p.err != nil {
		return p.err != nil
	}
	peers, err := p.pool.Peers(now, p.lease)
	if err != nil {
		p.fail(err)
		return true
	}
	for _, peer := range peers {
		// A lease file from the future is stamped by a clock other than
		// this one's (Lustre stamps files with its clients' clocks): it
		// tells nothing, and this task stays to watch.
		if peer.State == claim.Busy && (peer.Behind >= p.lease || peer.Behind < -p.beat) {
			return false
		}
	}
	return true
}

// takeOver takes over the claims of the dead tasks, and reports whether
// it took any.
func (p *poolRuns) takeOver(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.io.Lock()
	defer p.io.Unlock()
	if p.err != nil {
		return false
	}
	dead, err := p.pool.Dead(now, p.lease)
	if err != nil {
		p.fail(err)
		return false
	}
	for task := range p.cleared {
		if !slices.Contains(dead, task) {
			delete(p.cleared, task) // it came back
		}
	}
	dead = slices.DeleteFunc(dead, func(task string) bool { return p.cleared[task] })
	if len(dead) == 0 {
		return false
	}
	all, err := p.pool.Claims()
	if err != nil {
		p.fail(err)
		return false
	}
	for _, task := range dead {
		p.cleared[task] = true // unless a claim of its is left below
	}
	took := 0
	for _, c := range all {
		if !slices.Contains(dead, c.Task) {
			continue
		}
		got, ok, err := p.pool.TakeOver(c)
		if err != nil {
			delete(p.cleared, c.Task) // to be tried again
			continue
		}
		if !ok {
			continue // another task's now
		}
		p.mine = append(p.mine, &owned{c: got, upto: got.From})
		p.ran = true
		took++
	}
	if took == 0 {
		return false
	}
	slices.SortFunc(p.mine, func(a, b *owned) int { return a.c.From - b.c.From })
	// What the dead task finished is in its ledger: read them all again.
	// Ledgers that cannot be read stop the task: without them, a run the
	// dead task ended would run again.
	d, err := ledger.ReadDir(p.s.output, ledger.ReadOptions{})
	if err != nil {
		p.fail(err)
		return false
	}
	p.skip, _ = d.ResumeFilter(p.s.opts.retries)
	p.note(fmt.Sprintf("pool: took over %d claims of %v (no heartbeat for %v): their runs that did not end run here", took, dead, p.lease))
	return true
}

// over reports whether this idle task may leave: every other task is done
// or idle, or is dead with no claim left to it; of idle tasks seen alive,
// only the first by name stays to watch the busy ones.
func (p *poolRuns) over(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.io.Lock()
	defer p.io.Unlock()
	if len(p.given) > 0 || p.err != nil {
		return p.err != nil
	}
	if p.unhanded() || !p.hidden.IsZero() {
		return false // a claim taken over whose runs the next pass hands on, or one hidden
	}
	if st := p.state(); st != p.said {
		// Idle now: said at once, so that the others need not wait a
		// beat for it.
		if p.pool.Renew(st) == nil {
			p.said = st
		}
	}
	peers, err := p.pool.Peers(now, p.lease)
	if err != nil {
		p.fail(err)
		return true
	}
	busy, deadBusy := false, []string{}
	for _, peer := range peers {
		switch {
		case peer.State == claim.Idle && peer.Moved && !peer.Dead && peer.Task < p.s.pool:
			return true // it watches: one watcher is enough
		case peer.State == claim.Busy && !peer.Dead:
			busy = true
		case peer.State == claim.Busy && !p.cleared[peer.Task]:
			deadBusy = append(deadBusy, peer.Task)
		}
	}
	if busy {
		return false
	}
	if len(deadBusy) > 0 {
		// Dead while busy: it may still own claims to take over.
		all, err := p.pool.Claims()
		if err != nil {
			p.fail(err)
			return true
		}
		for _, c := range all {
			if slices.Contains(deadBusy, c.Task) {
				return false
			}
		}
	}
	return true
}

// close ends the task's part: it says done when every run it handed on
// ended for good, so that no task takes its claims over; else the others
// will once its lease expires.
func (p *poolRuns) close() {
	close(p.stop)
	p.lapse.Stop()
	proc.StopBy(p.guard, time.Time{}, 0, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.io.Lock()
	defer p.io.Unlock()
	if len(p.given) == 0 && p.exhausted && p.err == nil {
		p.pool.Renew(claim.Done)
	}
}

// left counts the runs of this task's claims not ended for good.
func (p *poolRuns) left() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.given)
	for _, o := range p.mine {
		if !p.lost[o.c.From] {
			n += o.c.To - o.upto
		}
	}
	return n
}

// poolLease is the pool's lease: Options.Lease, or DefaultLease raised
// to three times the caches of the output directory's mount where its
// options tell them; a lease too short for them, or for the runs' stop,
// is an error (claim.CheckLease). It also returns the caches.
func poolLease(out string, lease time.Duration, x execute.Options) (time.Duration, claim.Cache, error) {
	dir := out
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir) // not made yet: the mount it will be on
	}
	cache, err := claim.MountCache(dir)
	if err != nil {
		cache = claim.Cache{Why: err.Error()}
	}
	given := lease > 0
	if !given {
		lease = max(DefaultLease, 3*cache.Time)
	}
	_, ladder := stopLadder(x)
	if err := claim.CheckLease(lease, ladder, cache.Time); err != nil {
		if !given {
			return 0, cache, fmt.Errorf("pool: the default lease: %w", err)
		}
		return 0, cache, fmt.Errorf("pool: %w (%s)", err, cache.Why)
	}
	return lease, cache, nil
}

var errPoolShard = errors.New("a pool task runs the whole sweep's runs as it claims them: no shard goes with it")
