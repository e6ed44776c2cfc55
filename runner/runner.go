package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/claim"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Options say which sweep to run on this node, where to record it, and
// how. Only Source must be set: the zero value of every other field is a
// sensible default, as its comment says.
type Options struct {
	// Source says where the runs come from.
	Source sweep.Spec
	// Shard is which part of the sweep this invocation runs: "I/N", "none"
	// (all of it), or "" and "auto": the part the batch job's array index
	// and task rank give (batch.Job.Place).
	Shard string
	// RunsPerShard is the size of a part where the batch system does not
	// tell the array's size (PBS, LSF): --runs-per-shard.
	RunsPerShard int
	// Pool, if not empty, makes this invocation a task of a shared pool:
	// the tasks of a submission, each on its own node, draw the runs of
	// the whole sweep as their lanes free, from one output directory,
	// and take over the runs of a task that dies (see DefaultLease). It
	// names the task ("auto": the batch job's array task) and goes
	// without a Shard.
	Pool string
	// Lease is how long a pool task's heartbeat may stand still before
	// the others take its claims over; zero means DefaultLease, or three
	// times the output directory's NFS caches where its mount options say
	// they are longer (claim.CacheOf). It is renewed every sixth of it; a
	// task that cannot renew it stops its runs half a lease after its last
	// renewal (the supervisor does when the task is frozen, see
	// proc.StopBy), so Prepare refuses a lease shorter than six times the
	// runs' stop (their grace, two with a checkpoint signal), or than three
	// times the caches.
	Lease time.Duration
	// SearchTimeout is how long a searcher (Source.Search) may take to
	// answer one ask before it is stopped; zero means
	// DefaultSearchTimeout.
	SearchTimeout time.Duration
	// Output is the output directory; empty means DefaultOutput's.
	Output string
	// Job is the batch job this runs in, as batch.Detect tells it; the
	// zero Job is none.
	Job batch.Job
	// Plan, if it has slots, is recorded in the ledger's header as the
	// sweep's first wave (the command records pack.NewPlan's). Where runs
	// go is Execute's Topology, Request and Parallel.
	Plan pack.Plan
	// Node, if not nil, is recorded as JSON in the ledger's header (the
	// command records its resources.Node).
	Node any
	// Execute says how every run is executed and where it is placed
	// (Topology; Request, which is also Source.Request when that is zero;
	// Parallel).
	// Every run's request is checked against the Topology before anything
	// starts. Its OnEvent, if set, is called once the ledger's record of
	// the event is durable (a finished run's is fsynced), in order and
	// never concurrently, from the ledger's commit goroutine; it must not
	// block for long, since the events behind it wait. Its OutputDir,
	// Resume, DrainAt and TerminateAt are the runner's to set, and
	// TempDir defaults to the job's scratch directory.
	Execute execute.Options
	// RetryFailed also runs again the runs a resumed ledger says failed:
	// all of them, or those of RetryClasses (by their last attempt's
	// failure class) and of RetryRuns (by ID), when either is set.
	RetryFailed  bool
	RetryClasses []failure.Class
	RetryRuns    []string
	// PrunePrior lists earlier sweeps' output directories whose runs, of
	// the same metric and direction, inform Execute.Prune's forecast rule
	// from this sweep's first run on (schedule.Pruner.UsePrior): read in
	// Prepare, recorded in the ledger's header (which directories, how
	// many runs, a digest), and compared on a resume.
	PrunePrior []string
	// Restart starts over: the old ledger is kept as a backup and every
	// run runs, also when the output directory holds another sweep.
	Restart bool
	// Requeue has the batch system run the job again when it was stopped
	// with a warning (see Interrupt) or by StopBefore with runs left.
	Requeue bool
	// StopBefore, if not zero, starts no runs that long before the job's
	// end and stops the running ones in time for their grace, following
	// the job's end while it runs (batch.EndTime, batch.Follow).
	StopBefore time.Duration
	// CheckPrograms checks before anything starts that the program every
	// run starts can be found (the Wrap prefix's, bash, or the command's).
	CheckPrograms bool
	// Version and Command are recorded in the ledger's header: who ran
	// the sweep, and how.
	Version string
	Command []string
	// OnNote, if not nil, is told things worth saying while the sweep runs
	// ("the job's end moved …"), one line each. Calls may be concurrent
	// with OnEvent.
	OnNote func(string)
}

// Interrupt is the cause to cancel a sweep's context with: what stopped it
// ("SIGTERM"), which the ledger's end record says, and whether the batch
// job should run again — a warning before a time limit (sbatch --signal,
// SGE -notify) wants it, a cancellation (scancel, qdel) does not.
type Interrupt struct {
	Reason  string
	Requeue bool
}

// Error says what stopped the sweep: "stopped by SIGTERM".
func (i Interrupt) Error() string { return "stopped by " + i.Reason }

// Sweep is a sweep checked and ready to run: Prepare has read its source
// and the output directory's ledgers and decided what this invocation
// runs. Close it when done. It is not safe for concurrent use.
type Sweep struct {
	opts   Options
	source *sweep.Source
	def    sweep.Definition
	shard  sweep.Shard
	from   string        // what chose the shard
	pool   string        // the pool task's name; "" outside a pool
	lease  time.Duration // the pool's lease (poolLease)
	cache  claim.Cache   // the caches of the output directory's mount
	// poolRetired: the other tasks' runs that left the sweep (resume).
	poolRetired []ledger.PoolRetired
	output      string
	ledger      string // this shard's ledger file
	past        *ledger.Dir
	retired     []string  // runs of this shard's ledger not in this sweep
	done        int       // runs of this shard finished before (to be skipped)
	end         time.Time // the job's end, with StopBefore
	notes       []string
	// shareCPU counts the runs whose own request asks for a shared CPU
	// (cpus=0) where the default does not; shareFirst is the first's origin.
	shareCPU   int
	shareFirst string
	// mixed says runs ask for other requests than the default: a pool
	// task then looks ahead in its claims for backfilling.
	mixed bool
	// priors are the earlier sweeps the pruning policy learns from, and
	// what the ledger records of them.
	priors    []schedule.Prior
	priorRecs []ledger.Prior
}

// Prepare checks everything before anything starts: the source and every
// one of its runs, the programs the runs start (with CheckPrograms), the
// output directory and what its ledgers hold, and, with StopBefore, the
// job's end. It returns an error for bad input (naming the file and line
// where there is one) and for an output directory that holds another
// sweep (naming what changed); nothing has been written then.
func Prepare(opts Options) (*Sweep, error) {
	if !opts.RetryFailed && (len(opts.RetryClasses) > 0 || len(opts.RetryRuns) > 0) {
		return nil, errors.New("retry classes and runs choose among the failed runs: they go with RetryFailed")
	}
	if opts.Restart && opts.RetryFailed {
		return nil, errors.New("a restart reruns everything: retrying failed runs goes with a resume")
	}
	if opts.Requeue && !batch.CanRequeue(opts.Job) {
		return nil, fmt.Errorf("requeue: nodepack can requeue Slurm and Grid Engine jobs, not %s", batch.Describe(opts.Job))
	}
	if opts.Source.Request == (pack.Request{}) {
		// Directives and rules are read over what runs ask for by default.
		opts.Source.Request = opts.Execute.Request
	}
	src, err := opts.Source.Open()
	if err != nil {
		return nil, err
	}
	s := &Sweep{opts: opts, source: src, notes: src.Notes()}
	s.def = src.Definition()
	s.def.Env, s.def.Wrap = opts.Execute.Env, opts.Execute.Wrap
	if err := s.prepare(); err != nil {
		src.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sweep) prepare() error {
	opts := s.opts
	s.output = opts.Output
	if s.output == "" {
		s.output = defaultOutput(opts.Job, s.def, splits(opts.Shard, opts.Job) || opts.Pool != "" && opts.Job.Splits())
		// A name nodepack chose itself, in a directory others may write:
		// only a real directory of this user's is used (a link planted
		// there, or a ledger that says everything succeeded, is not).
		if err := ownDir(s.output); err != nil {
			return err
		}
	} else if named := s.output + "-" + s.def.Label() + "-" + s.def.Key(); missing(s.output) && !missing(named) && ownDir(named) == nil {
		// -o nodepack-OLDID to resume a job's sweep (a resubmission of a
		// deleted Grid Engine job, say) when it ran in its default
		// directory: the same name and key are the same sweep.
		s.output = named
		s.notes = append(s.notes, fmt.Sprintf("%s is this sweep's %s: resuming there", opts.Output, named))
	}
	if err := noLinks(s.output); err != nil {
		return err
	}
	s.source.SetOutputDir(s.output) // the runs' {run_dir} is under it
	src := s.source
	if err := s.scan(); err != nil {
		return err
	}
	if opts.CheckPrograms {
		if err := checkProgram(opts.Execute.Wrap, src); err != nil {
			return err
		}
	}
	if opts.StopBefore > 0 {
		s.notes = append(s.notes, stopBeforeNote(opts.Job, opts.StopBefore, &s.end))
	}
	var err error
	if s.priors, s.priorRecs, err = readPriors(opts.PrunePrior, s.output, opts.Execute.Prune, opts.Execute.Metrics); err != nil {
		return err
	}
	for _, r := range s.priorRecs {
		s.notes = append(s.notes, fmt.Sprintf("prune prior %s: %d runs, %d of them finished (to step %v): the forecast rule learns from them once this sweep's own runs agree with them", r.Dir, r.Runs, r.Finished, r.MaxStep))
	}
	if log := s.past.Log(filepath.Base(s.ledger)); log != nil && len(log.Sessions) > 0 && !opts.Restart {
		s.notes = append(s.notes, priorNotes(log.Header().PrunePrior, s.priorRecs, len(log.Judgements()) > 0)...)
	}
	return nil
}

// stopBeforeNote asks when job ends, sets end (the zero time when that is
// not known) and says what StopBefore will do. A job whose end is not
// known (it has no time limit; or the scheduler does not answer, or there
// is no batch job) runs its sweep to the end: that is no input error, and
// a job submitted without a time limit must run. Slurm is asked again
// while the sweep runs (see batch.Follow), so a limit set or told later
// still counts.
func stopBeforeNote(job batch.Job, before time.Duration, end *time.Time) string {
	t, from, err := batch.EndTime(job)
	switch {
	case err == nil:
		*end = t
		return fmt.Sprintf("the job ends at %s (%s): runs start until %s", t.Format(time.DateTime), from, t.Add(-before).Format(time.DateTime))
	case errors.Is(err, batch.ErrNoLimit):
		return fmt.Sprintf("stop before %v: the job has no time limit, so there is nothing to stop before: the sweep runs to its end", before)
	case !job.InJob():
		return fmt.Sprintf("stop before %v: not in a batch job, so there is no end to stop before: the sweep runs to its end", before)
	}
	return fmt.Sprintf("stop before %v: %v; the sweep runs as if the job had no limit until its end is known", before, err)
}

// scan reads the output directory's ledgers, then every run of the
// source, and decides what this session's ledger resumes: the same sweep,
// without the runs that left it, or nothing at all when the directory
// holds another sweep.
func (s *Sweep) scan() error {
	past, err := s.walk()
	if err != nil {
		return err
	}
	s.past = past
	if s.def.Kind == sweep.KindSearch {
		if s.opts.Pool != "" {
			return errSearchPool
		}
		if s.shard, s.from, err = chooseShard(s.opts.Shard, s.opts.Job, 0, s.opts.RunsPerShard); err != nil {
			return err
		}
		if s.shard.Count > 1 {
			return errSearchPool
		}
		// Every run its ledger holds was a proposal of this sweep's
		// searcher: none left the sweep.
		for _, log := range s.past.Logs {
			for i := range log.Len() {
				s.past.See(log.At(i).ID, 0)
			}
		}
		return s.resume()
	}
	if s.opts.Pool != "" {
		if sp := s.opts.Shard; sp != "" && sp != "auto" && sp != "none" {
			return fmt.Errorf("shard %s: %w", sp, errPoolShard)
		}
		if s.pool, err = poolTask(s.opts.Pool, s.opts.Job); err != nil {
			return err
		}
		if s.lease, s.cache, err = poolLease(s.output, s.opts.Lease, s.opts.Execute); err != nil {
			return err
		}
		s.shard, s.from = sweep.Shard{Index: 0, Count: 1}, "pool"
		s.shardNotes()
		return s.resume()
	}
	if s.shard, s.from, err = chooseShard(s.opts.Shard, s.opts.Job, s.source.Total(), s.opts.RunsPerShard); err != nil {
		return err
	}
	s.shardNotes()
	return s.resume()
}

// walk walks the source, checking every run's own request, and reads the
// output directory's ledgers meanwhile: it returns them with every run of
// the source seen in them.
func (s *Sweep) walk() (*ledger.Dir, error) {
	spec := s.source.Spec()
	check := s.requestCheck()
	// A sweep or a grid without rules gives its runs no request and was
	// checked as it was parsed: its walk only looks for the runs the
	// ledgers know, and stops once it found them all (Scan counts the
	// rest), so ten million combinations start at once, and a resumed
	// sweep walks about as far as it got.
	findOnly := len(spec.Requests) == 0 && (spec.Kind() == sweep.KindSweep || spec.Kind() == sweep.KindGrid)
	var past *ledger.Dir
	var pastErr error
	read := make(chan struct{})
	readPast := func() {
		defer close(read)
		if past, pastErr = ledger.ReadDir(s.output, ledger.ReadOptions{}); pastErr == nil && s.opts.Restart {
			past = &ledger.Dir{Path: s.output}
		}
	}
	type runAt struct {
		id    string
		index int
	}
	// The runs walked before the ledgers were read, in blocks: a slice
	// that doubles would copy a million of them over and over.
	var early [][]runAt
	ready := false // the ledgers are read, and early is seen
	see := func() {
		if pastErr == nil {
			// A million lookups: on every core.
			var wg sync.WaitGroup
			workers := min(runtime.GOMAXPROCS(0), len(early))
			for w := range workers {
				wg.Go(func() {
					for b := w; b < len(early); b += workers {
						for _, r := range early[b] {
							past.See(r.id, r.index)
						}
					}
				})
			}
			wg.Wait()
		}
		early, ready = nil, true
	}
	var seen func(run run.Run) error
	if findOnly {
		readPast()
		ready = true
		if pastErr != nil {
			return nil, pastErr
		}
		if known := past.Known(); known > 0 {
			seen = func(run run.Run) error {
				if past.See(run.ID, run.Index); past.Seen() == known {
					return sweep.SkipRest
				}
				return nil
			}
		}
	} else {
		// The whole source is walked and checked anyway: read the ledgers
		// meanwhile, on another core — a resume of a million runs waits
		// for the longer of the two, not for both.
		go readPast()
		seen = func(run run.Run) error {
			if !ready {
				select {
				case <-read:
					see()
				default:
				}
			}
			switch {
			case !ready:
				if n := len(early); n == 0 || len(early[n-1]) == cap(early[n-1]) {
					early = append(early, make([]runAt, 0, 4096))
				}
				last := &early[len(early)-1]
				*last = append(*last, runAt{run.ID, run.Index})
			case pastErr == nil:
				past.See(run.ID, run.Index)
			}
			if run.Request != nil {
				return check(run)
			}
			return nil
		}
	}
	err := s.source.Scan(seen)
	<-read
	if !ready {
		see()
	}
	if pastErr != nil {
		return nil, pastErr
	}
	return past, err
}

// shardNotes says which shard this is and where that came from, and what
// in the runs' requests or the shard count a user may not expect.
func (s *Sweep) shardNotes() {
	if s.shard.Count > 1 {
		from := ""
		if s.from != "" {
			from = " from " + s.from
		}
		s.notes = append(s.notes, fmt.Sprintf("shard %s%s: runs %d, %d, %d, …; shard none runs them all",
			s.shard, from, s.shard.Index, s.shard.Index+s.shard.Count, s.shard.Index+2*s.shard.Count))
	}
	if s.shareCPU > 0 {
		// Said where the runs' requests, not the plan, make runs share CPUs.
		who := fmt.Sprintf("%d runs ask", s.shareCPU)
		if s.shareCPU == 1 {
			who = "1 run asks"
		}
		s.notes = append(s.notes, fmt.Sprintf("%s for cpus=0 (from %s on): each shares one CPU with the other runs that do",
			who, s.shareFirst))
	}
	if m := s.opts.RunsPerShard; m > 0 && s.shard.Count > 1 {
		total := s.source.Total()
		if need := (total + m - 1) / m; need != s.shard.Count {
			s.notes = append(s.notes, fmt.Sprintf("%d shards for %d runs, not %d as %d runs per shard would give: each shard runs about %d",
				s.shard.Count, total, need, m, (total+s.shard.Count-1)/s.shard.Count))
		}
	}
}

// resume finds this shard's ledger in the output directory, refuses one
// of another sweep, and counts the runs it holds as done.
func (s *Sweep) resume() error {
	s.def.Shards = s.shard.Count
	file := ledger.FileName(s.shard.Index, s.shard.Count)
	if s.pool != "" {
		file = ledger.PoolFileName(s.pool)
	}
	s.ledger = filepath.Join(s.output, file)
	if changes := s.past.Changes(s.def); len(changes) > 0 {
		return anotherSweep(s.output, changes)
	}
	log := s.past.Log(file)
	retired, none := ledger.Retired(log, s.shard)
	if none {
		return anotherSweep(s.output, []string{fmt.Sprintf("none of the %d runs in %s is part of this sweep", log.Len(), file)})
	}
	s.retired = retired
	retiredSet := make(map[string]bool, len(retired))
	for _, id := range retired {
		retiredSet[id] = true
	}
	s.done, s.poolRetired = 0, nil
	logs := []*ledger.Log{log}
	if s.pool != "" {
		// The pool's runs are in every task's ledger.
		logs = nil
		for _, l := range s.past.Logs {
			if len(l.Sessions) > 0 && !l.Other && l.Whole() {
				logs = append(logs, l)
			}
		}
	}
	for _, log := range logs {
		gone := retiredSet
		if s.pool != "" && log.Name != s.ledger {
			// Each ledger's runs that left the sweep (a line edited since
			// its task ran it), not only this task's own: said in the
			// header, for the readers.
			ids, _ := ledger.Retired(log, s.shard)
			gone = make(map[string]bool, len(ids))
			for _, id := range ids {
				gone[id] = true
			}
			if len(ids) > 0 {
				s.poolRetired = append(s.poolRetired, ledger.PoolRetired{Ledger: filepath.Base(log.Name), Bytes: log.Size, Runs: ids})
			}
		}
		for i := range log.Len() {
			run := log.At(i)
			if !run.Retired && !gone[run.ID] && (run.State == ledger.StateSucceeded || run.State == ledger.StatePruned || run.State == ledger.StatePaused || run.State == ledger.StateFailed && !s.opts.retries(run)) {
				s.done++
			}
		}
	}
	return nil
}

// requestCheck returns the check of a run's own request: it must fit the
// empty node (the Topology), else the run could never start. Each
// distinct request is checked once.
func (s *Sweep) requestCheck() func(run.Run) error {
	x := s.opts.Execute
	s.shareCPU, s.shareFirst, s.mixed = 0, "", false // counted afresh when Start scans again
	fits := s.fitCheck()
	return func(run run.Run) error {
		r := *run.Request
		if err := fits(r); err != nil {
			return fmt.Errorf("%s: %w", run.Origin, err)
		}
		s.mixed = s.mixed || r != x.Request
		if r.CPUs == 0 && x.Request.CPUs > 0 {
			if s.shareCPU++; s.shareCPU == 1 {
				s.shareFirst = run.Origin
			}
		}
		return nil
	}
}

// fitCheck returns the check that a request fits the empty node, each
// distinct request checked once; it is not safe for concurrent use.
func (s *Sweep) fitCheck() func(pack.Request) error {
	x := s.opts.Execute
	var alloc *pack.Allocator
	if len(x.Topology.CPUs) > 0 || len(x.Topology.GPUs) > 0 {
		alloc = pack.NewAllocator(x.Topology)
	}
	checked := map[pack.Request]error{}
	return func(r pack.Request) error {
		err, done := checked[r]
		if !done {
			switch {
			case alloc != nil:
				err = alloc.Check(r)
			case r != x.Request:
				err = fmt.Errorf("%v: nothing to place it on", r)
			}
			if err == nil && r.AutoGPUMem && x.Sampler == nil {
				err = fmt.Errorf("%v: gpu_mem=auto needs the runs measured (a Sampler)", r)
			}
			checked[r] = err
		}
		return err
	}
}

// chooseShard turns the shard spec into this invocation's shard, and says
// what chose it.
func chooseShard(spec string, job batch.Job, total, runsPerShard int) (sweep.Shard, string, error) {
	if runsPerShard < 0 {
		return sweep.Shard{}, "", fmt.Errorf("runs per shard %d: must not be negative", runsPerShard)
	}
	switch spec {
	case "none":
		return sweep.Shard{Index: 0, Count: 1}, "", nil
	case "", "auto":
		p, err := job.Place(total, runsPerShard)
		if err != nil {
			return sweep.Shard{}, "", fmt.Errorf("shard auto: %w", err)
		}
		return sweep.Shard{Index: p.Index, Count: max(p.Count, 1)}, p.From, nil
	}
	sh, err := sweep.ParseShard(spec)
	if err != nil {
		return sweep.Shard{}, "", fmt.Errorf("shard: %w", err)
	}
	return sh, "", nil // given, not told by the job
}

// splits says, before the runs are counted, whether the shard spec will
// split the sweep: the default output directory depends on it.
func splits(spec string, job batch.Job) bool {
	switch spec {
	case "none":
		return false
	case "", "auto":
		return job.Splits()
	}
	sh, err := sweep.ParseShard(spec)
	return err == nil && sh.Count > 1
}

// defaultOutput is the output directory of a sweep of definition def when
// none is given: nodepack-NAME-KEY, with NAME the sweep's source or
// script and KEY def.Key(), so that two different sweeps started in one
// directory never share one by accident while the same sweep run again
// (grown, or with more reps) finds its own; inside a batch job
// nodepack-JOBID-NAME-KEY (see batch.OutputDir).
func defaultOutput(job batch.Job, def sweep.Definition, split bool) string {
	return batch.OutputDir(job, split, def.Label()+"-"+def.Key())
}

// anotherSweep is the error for a directory that holds a different sweep.
func anotherSweep(dir string, what []string) error {
	return &ConflictError{Dir: dir, Changes: what}
}

// ConflictError is Prepare's error for an output directory that holds
// another sweep: Changes say how it differs from this one, for a person.
// Options.Restart starts over there; another Output leaves it be.
type ConflictError struct {
	Dir     string
	Changes []string
}

// Error names the directory and the changes, and what to do.
func (e *ConflictError) Error() string {
	return e.Dir + " holds another sweep: " + strings.Join(e.Changes, "; ") +
		"; a restart starts over (the old ledger is kept as a backup), or choose another output directory"
}

// checkProgram checks that the program every run starts can be found: a
// missing one would fail every run with exit 127 and an empty log.
func checkProgram(wrap []string, src *sweep.Source) error {
	what, name := "the command", src.Program()
	switch {
	case len(wrap) > 0:
		what, name = "the wrapper", wrap[0]
	case src.Spec().Kind() == sweep.KindTasks:
		what = "task files run with bash"
	}
	if name == "" || strings.ContainsAny(name, "{}") {
		return nil // a placeholder: filled in per run
	}
	if err := lookPath(name); err != nil {
		return fmt.Errorf("%s: program %q not found: %w", what, name, err)
	}
	return nil
}

// SetPlan replaces Options.Plan, the first wave the ledger's header
// records: for a caller that lays the plan out once it knows how many runs
// there are (Total, pack.Options.Runs), so that --parallel 1000000 for a
// sweep of 4 runs lays out 4 slots, not a million.
func (s *Sweep) SetPlan(p pack.Plan) { s.opts.Plan = p }

// Output returns the output directory.
func (s *Sweep) Output() string { return s.output }

// Shard returns this invocation's shard of the sweep, and what in the
// batch job chose it (empty when the sweep is not split, or the shard was
// given).
func (s *Sweep) Shard() (sweep.Shard, string) { return s.shard, s.from }

// Total returns the number of runs of this shard, and in all shards.
func (s *Sweep) Total() (shard, all int) { return s.shard.Size(s.source.Total()), s.source.Total() }

// Definition returns what defines the sweep, as its ledger records it.
func (s *Sweep) Definition() sweep.Definition { return s.def }

// Notes returns remarks for the person running the sweep, one line each.
func (s *Sweep) Notes() []string { return s.notes }

// Source returns the opened source.
func (s *Sweep) Source() *sweep.Source { return s.source }

// Runs streams this shard's runs, all of them (what a dry run lists).
func (s *Sweep) Runs() iter.Seq2[run.Run, error] { return s.source.Runs(s.shard) }

// Close releases the source's files.
func (s *Sweep) Close() { s.source.Close() }

// Session is a sweep running: its ledger is open and its runs go on in
// the background until they are done or it is stopped (cancel the context
// given to Start, with an Interrupt as the cause, or Kill). Its methods may
// be called from any goroutine.
type Session struct {
	s      *Sweep
	ledger *ledger.Writer
	x      *execute.Execution
	// settled counts the runs this session finished for good: succeeded,
	// or failed with no retry left.
	settled atomic.Int64
	resume  func() ledger.ResumeCounts
	live    liveRuns // a pool task's or a searcher's runs; nil for fixed runs
	follow  chan struct{}
	ctx     context.Context
}

// Start opens (or resumes) the ledger — locked, read, given a header, so
// that an unwritable directory, a full disk, a corrupt ledger or another
// nodepack on it stop here, before anything runs — and starts the runs
// that are left.
func (s *Sweep) Start(ctx context.Context) (*Session, error) {
	opts := s.opts
	openLedger := func() (*ledger.Writer, error) {
		if opts.Restart {
			return ledger.Open(s.ledger, true)
		}
		return ledger.OpenFrom(s.ledger, s.past.Log(filepath.Base(s.ledger)))
	}
	w, err := openLedger()
	if err != nil {
		return nil, err
	}
	if !opts.Restart && w.Past().Size != s.past.Log(filepath.Base(s.ledger)).Size {
		// Another nodepack ended between the check and the lock: check
		// again, under the lock.
		w.Close()
		if err := s.scan(); err != nil {
			return nil, err
		}
		if w, err = openLedger(); err != nil {
			return nil, err
		}
	}
	shardTotal, _ := s.Total()
	if err := w.WriteHeader(s.header(shardTotal)); err != nil {
		if w.Err() == nil {
			// The header is down, the room for the session's records is
			// not: its end record says why nothing ran, so status tells a
			// start refused for room from a nodepack that was killed.
			w.WriteEnd(stopNote(err), max(shardTotal-s.done, 0))
		}
		w.Close()
		return nil, err
	}
	w.Past().Retire(s.retired)

	r := &Session{s: s, ledger: w, follow: make(chan struct{}), ctx: ctx}
	xo := opts.Execute
	xo.OutputDir = s.output
	if xo.TempDir == "" {
		xo.TempDir = opts.Job.Scratch
	}
	if opts.StopBefore > 0 && !s.end.IsZero() {
		xo.DrainAt, xo.TerminateAt = s.deadlines(s.end)
	}
	xo.Stagger = s.staggerWithin(xo.Stagger)
	// A resumed sweep counts its runs' attempts on, shares GPUs as densely
	// as its earlier sessions found paid, judges as they did, and keeps
	// their paused runs for promotion.
	xo.Resume = w.Past().PolicyState()
	xo.PrunePrior = s.priors
	onNote := xo.OnNote
	xo.OnNote = func(line string) {
		s.note(line)
		if onNote != nil {
			onNote(line)
		}
	}
	var ready sync.WaitGroup
	ready.Add(1)
	onEvent := opts.Execute.OnEvent
	live, err := s.openLive(ctx, &xo)
	if err != nil {
		w.WriteEnd(stopNote(err), 0)
		w.Close()
		return nil, err
	}
	xo.OnEvent = func(ev run.Event) {
		if live != nil {
			live.event(ev)
		}
		if ev.Kind == run.Finished && w.Check() != nil {
			// Before the run's slot is given to the next run: a ledger
			// deleted under the sweep stops it from starting more.
			ready.Wait()
			r.x.Drain()
		}
		// The record goes with the ledger's next group commit; the event
		// is passed on once it is durable, so that nothing is reported
		// done that a crash could take back.
		w.Post(ev, func(err error) {
			if err != nil || w.Problem() != nil {
				ready.Wait()
				r.x.Drain() // what runs must be recorded: start nothing more
			}
			if ev.Kind == run.Finished && !ev.Retry {
				switch {
				case ev.Promoted && ev.Reason == run.Interrupted:
					r.settled.Add(-1) // counted when it paused: left again
				case !ev.Promoted && ev.Reason != run.Interrupted:
					r.settled.Add(1) // a promotion's end was counted at its pause
				}
			}
			if live != nil && err == nil {
				live.recorded(ev)
			}
			if onEvent != nil {
				onEvent(ev)
			}
		})
		if ev.Kind == run.Judged && ev.Judgement != nil && ev.Judgement.Stop {
			// The run is stopped once this returns: its judgement is
			// written first, so that a nodepack killed while the run
			// shuts down (kill -9, a node that goes) leaves it pruned,
			// not interrupted, and a rerun does not run it again.
			w.Flush()
		}
	}
	onGPUFault := opts.Execute.OnGPUFault
	xo.OnGPUFault = func(f usage.GPUFault, none bool) {
		w.PostGPUOut(f, nil)
		line := fmt.Sprintf("GPU %s reported %s: taken out of use for the rest of this sweep; a run on it that fails runs again on another GPU", f.UUID, f.Reason)
		if none {
			line = fmt.Sprintf("GPU %s reported %s, and no GPU is left in use: no more runs start (check the GPUs: nvidia-smi -q, Xid lines in dmesg)", f.UUID, f.Reason)
		}
		s.note(line)
		if onGPUFault != nil {
			onGPUFault(f, none)
		}
	}
	onDensity := opts.Execute.OnDensity
	xo.OnDensity = func(c schedule.DensityChange) {
		rec := ledger.Density{Time: time.Now(), Shape: strings.ReplaceAll(c.Shape, "\x00", " "), From: c.From, To: c.To, Final: c.Final, Why: c.Why}
		for _, m := range c.At {
			rec.Measured = append(rec.Measured, ledger.DensityAt{Runs: m.Runs, StepsPerSec: m.StepsPerSec, Readings: m.Readings})
		}
		w.PostDensity(rec, nil)
		s.note(densityNote(rec))
		if onDensity != nil {
			onDensity(c)
		}
	}
	skip, resumed := w.Past().ResumeFilter(opts.retries)
	runs := s.source.RunsExcept(s.shard, skip)
	if live != nil {
		runs, resumed = live.runs(), live.resumed
	}
	r.resume = resumed
	r.x, err = execute.Start(ctx, runs, xo)
	ready.Done()
	if err != nil {
		if live != nil {
			live.close()
		}
		w.Close()
		return nil, err
	}
	if live != nil {
		r.live = live
		live.started(r.x)
	}
	if opts.StopBefore > 0 {
		go batch.Follow(opts.Job, s.end, opts.StopBefore, func(end time.Time) {
			r.x.SetDeadlines(s.deadlines(end))
			s.note(fmt.Sprintf("the job's end moved to %s: runs start until %s", end.Format(time.DateTime),
				end.Add(-opts.StopBefore).Format(time.DateTime)))
		}, r.follow)
	}
	return r, nil
}

// openPool opens the claims of this pool task and its run source.
func (s *Sweep) openPool(lanes int) (*poolRuns, error) {
	pool, err := claim.Open(s.output, s.def.Key(), s.pool, s.source.Total())
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	skip, counts := s.past.ResumeFilter(s.opts.retries)
	p := newPoolRuns(s, pool, skip, counts)
	p.lanes = lanes
	p.note = s.note
	if err := p.adopt(); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	// The first renewal, tried three times: one whose reply was lost may
	// read as failed while the cache hides its file (it is a new name).
	start := time.Now()
	err = pool.Renew(claim.Busy)
	for try := 1; err != nil && try < 3; try++ {
		time.Sleep(min(p.beat, time.Second))
		start, err = time.Now(), pool.Renew(claim.Busy)
	}
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	p.renewed(start)
	if !s.cache.Known {
		s.note(fmt.Sprintf("pool: the output directory is on %s: the lease of %v must be at least three times the time its caches may hide another task's change (docs/batch.md)", s.cache.Why, p.lease))
	}
	if !proc.Supervised() {
		s.note("pool: no supervisor runs beside this program (MaybeGuard): if it freezes, its runs go on past its lease")
	}
	return p, nil
}

func (s *Sweep) note(line string) {
	if s.opts.OnNote != nil {
		s.opts.OnNote(line)
	}
}

// densityNote says a decision of the density rule in a line.
func densityNote(d ledger.Density) string {
	what := fmt.Sprintf("%d runs per GPU", d.To)
	if d.To == 1 {
		what = "1 run per GPU"
	}
	if d.Final {
		what += ", for good"
	}
	return fmt.Sprintf("--runs-per-gpu auto: %s now at %s (%s)", d.Shape, what, d.Why)
}

// staggerWithin returns the stagger to use: d, unless the first wave's
// lanes would open past the job's end, when they open within the first
// half of the time left instead, with a note. The job's end is asked
// only for a stagger: one not known leaves d.
func (s *Sweep) staggerWithin(d time.Duration) time.Duration {
	lanes := max(s.opts.Plan.Parallel, len(s.opts.Plan.Slots))
	if d <= 0 || lanes < 2 {
		return d
	}
	end := s.end
	if end.IsZero() && s.opts.Job.InJob() {
		end, _, _ = batch.EndTime(s.opts.Job)
	}
	left := time.Until(end)
	if end.IsZero() || d*time.Duration(lanes-1) < left {
		return d
	}
	capped := max(left/time.Duration(2*(lanes-1)), time.Millisecond).Round(time.Millisecond)
	s.note(fmt.Sprintf("stagger %v: the first wave's %d lanes would open over %v, past the job's end (in %v): they open %v apart instead",
		d, lanes, d*time.Duration(lanes-1), left.Round(time.Second), capped))
	return capped
}

// terminateMargin is how long before the job's end, beyond the grace, the
// runs still running get SIGTERM under StopBefore: time to write the
// ledger's last records and exit before the batch system's own SIGTERM.
const terminateMargin = 5 * time.Second

// deadlines turns StopBefore into the runner's drain and terminate times
// for a job that ends at end: no new runs from StopBefore before the end,
// and SIGTERM to the running ones their grace plus a margin before it
// (never before the drain).
func (s *Sweep) deadlines(end time.Time) (drainAt, terminateAt time.Time) {
	grace := s.opts.Execute.GracePeriod()
	if s.opts.Execute.CheckpointSignal != 0 {
		grace *= 2 // up to a grace for the checkpoint, then one for SIGTERM
	}
	drainAt = end.Add(-s.opts.StopBefore)
	terminateAt = end.Add(-grace - terminateMargin)
	if terminateAt.Before(drainAt) {
		terminateAt = drainAt
	}
	return drainAt, terminateAt
}

// header is the session's first ledger record.
func (s *Sweep) header(total int) ledger.Header {
	def, shard := s.def, s.shard
	h := ledger.Header{
		Version:     s.opts.Version,
		Command:     s.opts.Command,
		Cwd:         workingDir(),
		Shard:       &shard,
		Pool:        s.pool,
		Total:       &total,
		Sweep:       &def,
		Retired:     s.retired,
		PoolRetired: s.poolRetired,
		PrunePrior:  s.priorRecs,
	}
	if def.Kind == sweep.KindSearch {
		h.Total = nil // a searcher proposes its runs as the sweep goes
	}
	if s.opts.Node != nil {
		h.Node, _ = json.Marshal(s.opts.Node)
	}
	if len(s.opts.Plan.Slots) > 0 {
		h.Plan, _ = json.Marshal(s.opts.Plan.Doc())
	}
	return h
}

// Ledger returns the session's ledger writer: what it found (Past,
// Warnings, Backup) and how it is doing (Problem).
func (r *Session) Ledger() *ledger.Writer { return r.ledger }

// Retired returns the runs of the ledger that are no longer part of the
// sweep, and so left out of its counts.
func (r *Session) Retired() []string { return r.s.retired }

// Running returns how many runs' processes are running now.
func (r *Session) Running() int { return r.x.Running() }

// Kill sends SIGKILL to every running run at once: the escalation for a
// second Ctrl-C.
func (r *Session) Kill() { r.x.Kill() }

// Outcome is how a session ended: data, also when Wait returns an error.
type Outcome struct {
	Summary execute.Summary
	Resumed ledger.ResumeCounts // what the session did with the runs the ledger knew
	// Left counts the runs a rerun would run: interrupted, deferred or
	// never started.
	Left int
	// Note is what the ledger's end record says of how the session ended.
	Note string
	// Interrupt is what stopped the sweep, when its context was cancelled
	// with an Interrupt as the cause.
	Interrupt *Interrupt
	// Requeued says the batch system was asked to run the job again;
	// RequeueExit is the exit status that asks it (Grid Engine's 99), or 0.
	Requeued    bool
	RequeueExit int
}

// LedgerError is (or is joined in) Wait's error when the ledger could not
// be kept as it should. Lost says records after Err are lost (a write
// failed); else none is, and the sweep stopped starting runs for its
// ledger's sake (it was deleted, its disk is full).
type LedgerError struct {
	Err  error
	Lost bool
}

// Error returns Err's message.
func (e *LedgerError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *LedgerError) Unwrap() error { return e.Err }

// RequeueError is joined in Wait's error when a requeue that was due
// failed: the job will not run again by itself.
type RequeueError struct{ Err error }

// Error returns Err's message.
func (e *RequeueError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RequeueError) Unwrap() error { return e.Err }

// Wait waits for the session to end, writes the ledger's end record,
// asks the batch system for a requeue when one is due, and says how it
// ended. Its error is nil when the runner, the ledger and the requeue did
// their part (a run's failure is data, in Outcome.Summary); else it joins,
// in this order, the runner's error (the context's cancellation, a kill, a
// bad run further down the source, a run that could not be set up, as
// execute.Execution.Wait says), a *LedgerError and a *RequeueError.
func (r *Session) Wait() (Outcome, error) {
	sum, err := r.x.Wait()
	close(r.follow)
	if r.live != nil {
		r.ledger.Flush() // every end recorded (and told to a searcher) before it closes
		r.live.close()
	}
	defer r.ledger.Close()
	r.ledger.Flush() // every event recorded and passed on
	lost, problem := r.ledger.Err(), r.ledger.Problem()
	o := Outcome{Summary: sum, Resumed: r.resume()}
	var in Interrupt
	if errors.As(context.Cause(r.ctx), &in) && r.ctx.Err() != nil {
		o.Interrupt = &in
	}
	o.Left = r.countLeft()
	o.Note = "done"
	switch {
	case o.Interrupt != nil:
		o.Note = in.Error()
	case problem != nil:
		o.Note = stopNote(problem)
	case diskFull(err):
		o.Note = stopNote(err) // the disk a run's directory and logs are on
	case sum.Drained:
		o.Note = "stopped before the job's end, leaving the runs time to finish"
	case err != nil:
		o.Note = "stopped: " + err.Error()
	}
	if lost == nil {
		lost = r.ledger.WriteEnd(o.Note, o.Left)
	}
	var requeueErr error
	warned := o.Interrupt != nil && o.Interrupt.Requeue
	if r.s.opts.Requeue && (warned || sum.Drained && problem == nil) && o.Left != 0 && lost == nil {
		o.RequeueExit, requeueErr = batch.Requeue(r.s.opts.Job)
		o.Requeued = requeueErr == nil
	}
	errs := []error{err}
	switch {
	case lost != nil:
		errs = append(errs, &LedgerError{Err: lost, Lost: true})
	case problem != nil:
		errs = append(errs, &LedgerError{Err: problem})
	}
	if requeueErr != nil {
		errs = append(errs, &RequeueError{requeueErr})
	}
	return o, errors.Join(errs...)
}

// stopNote is the end record's note of a session stopped by err.
func stopNote(err error) string {
	if diskFull(err) {
		return "stopped: disk full (no space left on device)"
	}
	return "stopped: " + err.Error()
}

// diskFull reports whether err says a disk is full, or a quota reached.
func diskFull(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}

// retries reports whether a run the ledger says failed runs again.
func (o *Options) retries(run ledger.Run) bool {
	if !o.RetryFailed {
		return false
	}
	if len(o.RetryClasses) > 0 && !slices.Contains(o.RetryClasses, run.Class) {
		return false
	}
	return len(o.RetryRuns) == 0 || slices.Contains(o.RetryRuns, run.ID)
}

// countLeft counts the runs of this shard that a rerun would run: neither
// succeeded nor failed (unless RetryFailed), before or in this session.
// The runs finished before were counted when the sweep was prepared (Done)
// and were not run again, so it is a subtraction: the source is not read
// again, and a sweep of millions of runs exits as soon as its runs do.
func (r *Session) countLeft() int {
	if r.live != nil {
		return r.live.left()
	}
	shard, _ := r.s.Total()
	return max(shard-r.s.done-int(r.settled.Load()), 0)
}

// Done returns how many runs of this shard were finished before the
// session started, and will be skipped: a resumed sweep's progress starts
// there.
func (s *Sweep) Done() int { return s.done }

// lookPath finds a program as exec does: in PATH, or, named with a
// directory (./prog), as an executable file.
func lookPath(name string) error {
	if !strings.Contains(name, "/") {
		_, err := exec.LookPath(name)
		return err
	}
	st, err := os.Stat(name)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// workingDir is the directory the sweep's command ran in, for the header:
// its relative paths are relative to it. "" if unknown.
func workingDir() string {
	d, _ := os.Getwd()
	return d
}
