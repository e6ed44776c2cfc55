package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

const runUsage = `Usage: nodepack run [flags] TASKFILE
       nodepack run [flags] --sweep|--grid FILE|--params FILE [--reps N] -- COMMAND [ARGS…]

Runs every command of TASKFILE (one shell command per line, run with
bash -c; blank lines and # comments are skipped; - reads standard input,
and a pipe or process substitution works too), or every run of a
Hydra-style sweep, YAML grid or JSON-lines params file (executed directly,
no shell; {key}, {rep}, {index}, {run_id}, {run_dir} and {params_json}
fill in the arguments), on this node, as many at once as the plan has
slots. Each run gets its own GPUs (CUDA_VISIBLE_DEVICES with full UUIDs),
its own CPUs (affinity set before it starts, OMP_NUM_THREADS and friends
capped to match), a private TMPDIR, and a directory
OUTPUT/runs/<name>-<run-id>/ with stdout.log, stderr.log and, for sweeps,
grids and params, params.json.

Everything is checked before anything starts: every line of the input
(bash must be able to parse each task line), the program every run
starts, the plan, the output directory. Bad input exits 2 with one line
naming the file and line.

Every start and end is appended to OUTPUT/ledger.jsonl (one file per
shard), which records what defines the sweep: its source, command,
--env and --wrap. Rerunning the same command resumes: runs that succeeded
are skipped, interrupted ones (also those running when nodepack was
killed) run again, failed ones only with --retry-failed, new ones (a
grown task file or grid, more --reps) run; --restart starts over. Runs
must therefore tolerate being run again. A rerun into a directory that
holds another sweep (another source, command, --env or --wrap) is refused.
OUTPUT defaults to nodepack-NAME-KEY (NAME from the task file or script,
KEY a hash of the sweep's definition), and inside a batch job to
nodepack-JOBID-NAME-KEY (the array's id for a sharded array job), so a
requeued job resumes; the first line printed names it. 'nodepack status
OUTPUT' shows the progress from any shell.

Exit status: 0 all runs succeeded, 1 some failed (now or before, when
skipped) or the ledger could not be kept, 2 bad usage or input (also an
unwritable OUTPUT, a corrupt ledger or another sweep in OUTPUT: nothing
started), 3 stopped by --stop-before with runs left for a requeue, 128+N
when stopped by signal N (129 SIGHUP, 130 SIGINT, 143 SIGTERM, 138
SIGUSR1). On SIGTERM, SIGINT, SIGHUP (the terminal or ssh session
closed), SIGUSR1 or SIGUSR2 nodepack starts no more runs, sends SIGTERM to
every run's process group and SIGKILL after --grace, records every end
and exits; a second SIGINT kills at once.

Inside an array job (Slurm, Grid Engine, PBS, LSF) or an srun -n K step,
each nodepack runs its shard of the runs (--shard auto): run i goes to
shard i mod N.

Examples:
  nodepack run --parallel 2 examples/tasks/hello.txt
  nodepack run --sweep -- python train.py model=convnet,transformer +iteration='range(2)' lr=0.1
  nodepack run --grid params.yml -- python train_mnist.py
  nodepack run --params runs.jsonl --reps 3 -- python train.py --out={run_dir} --seed={rep}
  nodepack run --runs-per-gpu 2 --timeout 2h --retries 1 sweep.txt
  seq 100 | sed 's/^/python train.py --seed=/' | nodepack run -
  nodepack run --stop-before 10m -o sweep1 sweep.txt   # in sbatch, with --requeue`

// runOptions are run's flags. The runner's own options are bound by the
// flags directly; the rest say what to run, where to record it and how to
// talk about it.
type runOptions struct {
	nodeOptions
	packOptions
	runner.Options
	source         sourceOptions
	Output         string
	Wrap           string // split into Options.Wrap
	GPUIDs         string // Options.GPUIDs
	FailFast       bool   // Options.MaxFailures = 1
	Live           bool
	Quiet          bool
	RetryFailed    bool
	Restart        bool
	StopBefore     time.Duration
	Requeue        bool
	SampleInterval time.Duration
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	o.packOptions.AddFlags(fs)
	o.source.AddFlags(fs)
	fs.StringVarP(&o.Output, "output", "o", "", "`DIR` for the ledger and logs (DIR/runs/<name>-<run-id>/); default nodepack-NAME-KEY, in a batch job nodepack-JOBID-NAME-KEY")
	fs.BoolVar(&o.RetryFailed, "retry-failed", false, "when resuming, also run again the runs that failed")
	fs.BoolVar(&o.Restart, "restart", false, "start over: keep the old ledger as a backup and run everything (also when DIR holds another sweep)")
	fs.BoolVar(&o.Requeue, "requeue", false, "when stopped by SIGUSR1/SIGUSR2 (sbatch --signal) or --stop-before with runs left, have the batch system run this job again (Slurm: scontrol requeue; Grid Engine: exit 99); never on SIGTERM (scancel)")
	fs.DurationVar(&o.StopBefore, "stop-before", 0, "start no runs `D` before the job's end (Slurm: SLURM_JOB_END_TIME or squeue, followed while the job runs) and stop running ones in time for --grace; 0 means off")
	fs.DurationVar(&o.SampleInterval, "sample-interval", 10*time.Second, "measure each run's process tree and GPUs every `D`; 0 means only the kernel's totals")
	fs.DurationVar(&o.Stagger, "stagger", 0, "start slot i's first run i×`D` after the start")
	fs.DurationVar(&o.MinStartInterval, "min-start-interval", 0, "at least `D` between any two starts")
	fs.DurationVar(&o.Timeout, "timeout", 0, "stop a run after `D` (SIGTERM, then SIGKILL after --grace); 0 means none")
	fs.DurationVar(&o.Grace, "grace", runner.DefaultGrace, "time between SIGTERM and SIGKILL")
	fs.IntVar(&o.Retries, "retries", 0, "run a failed or timed-out run up to `N` more times")
	fs.IntVar(&o.MaxFailures, "max-failures", 0, "start no new runs after `N` failures; 0 means keep going")
	fs.BoolVar(&o.FailFast, "fail-fast", false, "start no new runs after the first failure (--max-failures 1)")
	fs.StringVar(&o.GPUIDs, "gpu-ids", "uuid", "how CUDA_VISIBLE_DEVICES names GPUs: uuid or index")
	fs.BoolVar(&o.Render, "render", false, "also set EGL_DEVICE_ID, MUJOCO_EGL_DEVICE_ID and PYGLET_HEADLESS_DEVICE")
	fs.BoolVar(&o.NoThreadCaps, "no-thread-caps", false, "do not set OMP_NUM_THREADS, MKL_NUM_THREADS, … to the run's CPU count")
	fs.StringArrayVar(&o.Env, "env", nil, "set `K=V` in every run (repeatable); K alone takes nodepack's own value of K; V may use {run_id}, {run_dir}, {index}, {rep} and {attempt}")
	fs.StringVar(&o.Wrap, "wrap", "", "put `PREFIX` before every run, e.g. 'ch-run --set-env=config.env img --'")
	fs.BoolVar(&o.Live, "live", false, "also stream every run's output, each line prefixed with where the run comes from (tasks.txt:12)")
	fs.BoolVarP(&o.Quiet, "quiet", "q", false, "report only failures and the summary")
	o.nodeOptions.AddFlags(fs)
}

// finish checks the flags and completes the runner's options from them.
func (o *runOptions) finish() error {
	for name, d := range map[string]time.Duration{"--stagger": o.Stagger, "--min-start-interval": o.MinStartInterval, "--timeout": o.Timeout, "--grace": o.Grace,
		"--stop-before": o.StopBefore, "--sample-interval": o.SampleInterval} {
		if d < 0 {
			return fmt.Errorf("%s %v: must not be negative", name, d)
		}
	}
	if o.Retries < 0 || o.MaxFailures < 0 {
		return errors.New("--retries and --max-failures must not be negative")
	}
	if o.Restart && o.RetryFailed {
		return errors.New("--restart reruns everything: --retry-failed goes with a resume")
	}
	if o.FailFast {
		o.MaxFailures = 1
	}
	switch mode := runner.GPUIDMode(o.GPUIDs); mode {
	case runner.GPUUUIDs, runner.GPUIndices:
		o.Options.GPUIDs = mode
	default:
		return fmt.Errorf("--gpu-ids %q: want uuid or index", o.GPUIDs)
	}
	env, err := resolveEnv(o.Env, os.LookupEnv)
	if err != nil {
		return err
	}
	o.Env = env
	if o.Wrap != "" {
		words, err := splitWords(o.Wrap)
		if err != nil {
			return fmt.Errorf("--wrap: %w", err)
		}
		o.Options.Wrap = words
	}
	return nil
}

// envKey is a variable name --env accepts.
var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envSecondVar finds ",NAME=" in a value: a second variable given in one
// --env, as sbatch --export would take it.
var envSecondVar = regexp.MustCompile(`,[A-Za-z_][A-Za-z0-9_]*=`)

// resolveEnv checks --env entries and fills in the ones given as KEY alone
// from nodepack's environment.
func resolveEnv(entries []string, lookup func(string) (string, bool)) ([]string, error) {
	var env []string
	for _, kv := range entries {
		k, v, hasValue := strings.Cut(kv, "=")
		if !envKey.MatchString(k) {
			return nil, fmt.Errorf("--env %q: want KEY=VALUE or KEY", kv)
		}
		if !hasValue {
			value, ok := lookup(k)
			if !ok {
				return nil, fmt.Errorf("--env %s: %s is not set in nodepack's environment", k, k)
			}
			env = append(env, k+"="+value)
			continue
		}
		if m := envSecondVar.FindString(v); m != "" {
			return nil, fmt.Errorf("--env %q: one variable per --env: give --env %s=%s --env %s (a value that holds %q can come from nodepack's environment: export it and give --env %s)",
				kv, k, v[:strings.Index(v, m)], v[strings.Index(v, m)+1:], m, k)
		}
		env = append(env, kv)
	}
	return env, nil
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o runOptions
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.AddFlags(fs)
	if code, ok := parseFlags(fs, runUsage, args, stdout, stderr); !ok {
		return code
	}
	// nodepack's own output never blocks the sweep, and a reader that
	// goes away (| head) does not kill it: SIGPIPE becomes EPIPE, which
	// the console counts. Notify, not Ignore: an ignored signal would be
	// inherited by the runs.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	errOut := newConsole(stderr)
	outOut := newConsole(stdout)
	defer func() {
		outOut.close(consoleWait)
		if dropped := errOut.close(consoleWait); dropped > 0 {
			fmt.Fprintf(stderr, "nodepack: %d lines of its own output could not be written (the ledger and the run logs are complete)\n", dropped)
		}
	}()
	s := &session{o: &o, args: fs.Args(), rawArgs: args, stdout: outOut, stderr: errOut}
	defer s.o.source.close()
	if err := s.prepare(ctx); err != nil {
		return usageErrorf(errOut, "run", "%v", err)
	}
	if o.source.DryRun {
		printNotes(errOut, o.source.Notes)
		return o.source.printDryRun(outOut, errOut)
	}
	return s.run(ctx)
}

// consoleWait is how long nodepack waits for its own output to be written
// out when it ends.
const consoleWait = 2 * time.Second

// session is one invocation of nodepack run: what it checked before
// starting anything, then the sweep.
type session struct {
	o              *runOptions
	args, rawArgs  []string
	stdout, stderr io.Writer

	node     resources.Node
	plan     pack.Plan
	sched    resources.Scheduler
	shard    runner.Shard
	ledgerAt string                   // the ledger file of this shard
	past     *pastSweep               // the output directory's ledgers before this session
	seen     map[string]int           // index of every run of the sweep a ledger knows
	retired  []string                 // runs of this shard's ledger not in this sweep
	end      time.Time                // the job's end, with --stop-before
	endFrom  string                   // where end came from
	done     int                      // runs of this shard finished before (skipped)
	ended    map[string]runner.Reason // this session's final reasons, by run id
	running  atomic.Int64
}

// prepare checks everything the user gave before anything starts: the
// node, the plan, the programs, every run of the source, the output
// directory and what its ledgers hold.
func (s *session) prepare(ctx context.Context) error {
	o := s.o
	if err := o.finish(); err != nil {
		return err
	}
	var err error
	if s.node, err = o.load(ctx); err != nil {
		return err
	}
	if o.Inventory != "" {
		if err := checkInventoryHere(ctx, s.node); err != nil {
			return err
		}
	}
	if s.plan, err = pack.NewPlan(s.node.Topology(), o.packOptions.Options); err != nil {
		return err
	}
	s.sched = resources.DetectScheduler(os.LookupEnv)
	if o.Requeue && !canRequeue(s.sched) {
		return fmt.Errorf("--requeue: nodepack can requeue Slurm and Grid Engine jobs, not %s", describeKind(s.sched))
	}
	src := &o.source
	src.CheckShell = true
	if err := src.prepare(s.args); err != nil {
		return err
	}
	src.Definition.Env, src.Definition.Wrap = o.Env, o.Options.Wrap
	if o.Output == "" {
		o.Output = defaultOutput(s.sched, src.Definition, predictSharded(src.ShardSpec, s.sched))
	}
	src.OutputDir = o.Output
	if err := s.scan(); err != nil {
		return err
	}
	if !src.DryRun { // a dry run may list runs for another machine
		if err := s.checkPrograms(); err != nil {
			return err
		}
	}
	if o.StopBefore > 0 {
		if s.end, s.endFrom, err = jobEnd(s.sched); err != nil {
			return fmt.Errorf("--stop-before: %w", err)
		}
	}
	return nil
}

// scan reads the output directory's ledgers, then every run of the
// source, and decides what this session's ledger resumes: the same sweep,
// without the runs that left it, or nothing at all when the directory
// holds another sweep.
func (s *session) scan() error {
	o, src := s.o, &s.o.source
	var err error
	if s.past, err = readPast(o.Output); err != nil {
		return err
	}
	if o.Restart {
		s.past = &pastSweep{dir: o.Output, logs: map[string]*runner.LedgerLog{}}
	}
	s.seen = map[string]int{}
	if err := src.scan(func(id string, index int) {
		if s.past.knows(id) {
			s.seen[id] = index
		}
	}); err != nil {
		return err
	}
	if err := src.chooseShard(src.Total); err != nil {
		return err
	}
	s.shard = src.Shard
	if s.shard.Count < 1 {
		s.shard = runner.Shard{Index: 0, Count: 1}
	}
	src.Definition.Shards = s.shard.Count
	file := runner.LedgerFileName(s.shard.Index, s.shard.Count)
	s.ledgerAt = filepath.Join(o.Output, file)
	if changes := s.past.sameSweep(src.Definition, s.shard); len(changes) > 0 {
		return anotherSweep(o.Output, changes)
	}
	log := s.past.log(file)
	retired, none := retired(log, s.seen, s.shard)
	if none {
		return anotherSweep(o.Output, []string{fmt.Sprintf("none of the %s in %s is part of this sweep", countWord(len(log.Order), "run"), file)})
	}
	s.retired = retired
	retiredSet := map[string]bool{}
	for _, id := range retired {
		retiredSet[id] = true
	}
	for id, run := range log.Runs {
		if !retiredSet[id] && (run.State == runner.StateSucceeded || run.State == runner.StateFailed && !o.RetryFailed) {
			s.done++
		}
	}
	return nil
}

// checkPrograms checks that the program every run starts exists: the
// --wrap prefix's, or bash for a task file, or the command's.
func (s *session) checkPrograms() error {
	o := s.o
	switch {
	case len(o.Options.Wrap) > 0:
		return checkProgram("--wrap", o.Options.Wrap[0])
	case o.source.kind() == runner.KindTasks:
		return checkProgram("task files run with bash", "bash")
	}
	return checkProgram("the command", o.source.args[0])
}

// checkInventoryHere refuses to run on a node saved elsewhere with CPUs
// this process may not use or GPUs this node does not show.
func checkInventoryHere(ctx context.Context, inv resources.Node) error {
	here, err := resources.Detect(ctx, resources.Options{})
	if err != nil {
		return err
	}
	allowed := map[int]bool{}
	for _, id := range here.CPUIDs() {
		allowed[id] = true
	}
	var foreign []int
	for _, id := range inv.CPUIDs() {
		if !allowed[id] {
			foreign = append(foreign, id)
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("--inventory: CPUs %s are not among the CPUs this process may use here (%s): plan with --inventory, run with the node's own CPUs",
			pack.FormatCPUList(foreign), pack.FormatCPUList(here.CPUIDs()))
	}
	gpus := map[string]bool{}
	for _, g := range here.GPUs {
		gpus[g.UUID] = true
		for _, m := range g.MIG {
			gpus[m.UUID] = true
		}
	}
	for _, g := range inv.GPUs {
		if !gpus[g.UUID] {
			return fmt.Errorf("--inventory: GPU %d (%s) is not on this node (it shows %d GPUs): plan with --inventory, run with the node's own GPUs", g.Index, g.UUID, len(here.GPUs))
		}
	}
	return nil
}

// run opens the ledger, runs the sweep and reports; it returns the exit
// status.
func (s *session) run(ctx context.Context) int {
	o := s.o
	fmt.Fprintf(s.stderr, "nodepack: output %s (nodepack status %s)\n", o.Output, o.Output)
	printWarnings(s.stderr, s.node.Warnings)
	printWarnings(s.stderr, s.plan.Warnings)
	printNotes(s.stderr, o.source.Notes)

	// The ledger: locked, read and given a header before anything runs, so
	// an unwritable directory, a full disk, a corrupt ledger or another
	// nodepack on it stop here.
	ledger, err := runner.OpenLedger(s.ledgerAt, o.Restart)
	if err != nil {
		return usageErrorf(s.stderr, "run", "%v", err)
	}
	defer ledger.Close()
	if b := ledger.Backup(); b != "" {
		fmt.Fprintf(s.stderr, "nodepack: --restart: the old ledger is now %s\n", b)
	}
	if !o.Restart && ledger.Past().Size != s.past.log(filepath.Base(s.ledgerAt)).Size {
		// Another nodepack ended between the check and the lock: check again.
		ledger.Close()
		if err := s.scan(); err != nil {
			return usageErrorf(s.stderr, "run", "%v", err)
		}
		if ledger, err = runner.OpenLedger(s.ledgerAt, false); err != nil {
			return usageErrorf(s.stderr, "run", "%v", err)
		}
		defer ledger.Close()
	}
	printWarnings(s.stderr, ledger.Warnings())
	total := s.shard.Size(o.source.Total)
	if err := ledger.WriteHeader(s.header(total)); err != nil {
		return usageErrorf(s.stderr, "run", "%v", err)
	}
	ledger.Past().Retire(s.retired)
	printResuming(s.stderr, ledger.Past(), len(s.retired), o.RetryFailed)

	o.OutputDir = o.Output
	o.TempDir = s.sched.Scratch
	if o.StopBefore > 0 {
		o.DrainAt, o.TerminateAt = deadlines(s.end, o.StopBefore, o.Grace)
	}
	o.PriorAttempts = ledger.PriorAttempts
	progress := newProgress(s.stderr, total, s.done, o.Quiet)
	s.ended = make(map[string]runner.Reason)
	var x *runner.Execution
	var xReady sync.WaitGroup
	xReady.Add(1)
	o.OnEvent = func(ev runner.Event) {
		if err := ledger.Record(ev); err != nil || ledger.Problem() != nil {
			xReady.Wait()
			x.Drain() // what runs must be recorded: start nothing more
		}
		switch {
		case ev.Kind == runner.Started:
			s.running.Add(1)
		case ev.PID != 0:
			s.running.Add(-1)
		}
		if ev.Kind == runner.Finished && !ev.Retry {
			s.ended[ev.Run.ID] = ev.Reason
		}
		progress.event(ev)
	}
	if o.Live {
		o.Options.Live = progress.liveWriter(s.stdout)
	}
	if sampler := newUsageSampler(o.SampleInterval); sampler != nil {
		defer sampler.Close()
		o.Sampler = sampler
	}
	runs, resumed := ledger.Resume(o.source.open(), o.RetryFailed)

	ctx, signals := notifySignals(ctx, s.stderr, &s.running, o.Grace)
	defer signals.stop()
	x, err = runner.Start(ctx, s.plan.Slots, runs, o.Options)
	xReady.Done()
	if err != nil {
		return usageErrorf(s.stderr, "run", "%v", err)
	}
	following := make(chan struct{})
	go signals.killOnSecond(x, following)
	if o.StopBefore > 0 {
		go followJobEnd(s.sched, s.end, o.StopBefore, o.Grace, x.SetDeadlines, func(note string) { printNotes(s.stderr, []string{note}) }, following)
	}
	sum, err := x.Wait()
	close(following)
	progress.finish()
	return s.report(ledger, sum, resumed(), err, signals.signal())
}

// header is the session's first ledger record.
func (s *session) header(total int) runner.LedgerRecord {
	def := s.o.source.Definition
	shard := s.shard
	h := runner.LedgerRecord{
		Version: nodepackVersion(),
		Command: append([]string{"nodepack", "run"}, s.rawArgs...),
		Shard:   &shard,
		Total:   &total,
		Sweep:   &def,
		Retired: s.retired,
	}
	h.Node, _ = json.Marshal(s.node)
	h.Plan, _ = json.Marshal(planDocument(s.plan))
	return h
}

// report ends the session: the summary, the end record, a requeue, and
// the exit status.
func (s *session) report(ledger *runner.Ledger, sum runner.Summary, counts runner.ResumeCounts, err error, sig syscall.Signal) int {
	o := s.o
	printSummary(s.stderr, sum, o.Output)
	printSkipped(s.stderr, counts)
	ledgerErr, problem := ledger.Err(), ledger.Problem()
	// A sweep that ran to its end left nothing for a requeue; only a
	// stopped one is worth reading the source again to count what is left.
	left := 0
	if sig != 0 || sum.Drained || sum.Stopped || err != nil || problem != nil {
		left = s.countLeft(ledger.Past())
	}
	note := "done"
	switch {
	case sig != 0:
		note = "stopped by " + unix.SignalName(sig)
	case problem != nil && errors.Is(problem, syscall.ENOSPC):
		note = "stopped: disk full (no space left on device)"
	case problem != nil:
		note = "stopped: " + problem.Error()
	case sum.Drained:
		note = "stopped before the job's end (--stop-before)"
	case err != nil:
		note = "stopped: " + err.Error()
	}
	if ledgerErr == nil {
		if err := ledger.WriteEnd(note, max(left, 0)); err != nil {
			ledgerErr = err
		}
	}
	switch {
	case ledgerErr != nil:
		fmt.Fprintf(s.stderr, "nodepack: stopped starting runs: %v; the ledger holds every record written before, and a rerun runs the rest again\n", ledgerErr)
	case problem != nil:
		fmt.Fprintf(s.stderr, "nodepack: stopped starting runs: %v; rerun the same command to run the rest\n", problem)
	}
	// Only a warning (sbatch --signal, SGE -notify) or --stop-before asks for
	// a requeue: SIGTERM is scancel, qdel or a time limit already reached.
	warned := sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2
	requeue := o.Requeue && (warned || sum.Drained && problem == nil) && left != 0 && ledgerErr == nil
	if sig != 0 {
		fmt.Fprintf(s.stderr, "nodepack: stopped by %s: %s interrupted; rerun the same command to run them again\n", unix.SignalName(sig), countWord(sum.Interrupted, "run"))
		code := exitSignalBase + int(sig)
		if requeue {
			return requeueJob(s.sched, s.stderr, code)
		}
		return code
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "nodepack run: %v\n", err)
		if sum.Runs == 0 {
			return exitUsage
		}
		return exitFailed
	}
	if ledgerErr != nil || problem != nil {
		return exitFailed
	}
	if sum.Drained {
		fmt.Fprintf(s.stderr, "nodepack: stopped starting runs %v before the job's end (--stop-before): %s deferred to the requeue; rerun the same command to run them\n",
			o.StopBefore, countWord(left, "run"))
		if left != 0 {
			if requeue {
				return requeueJob(s.sched, s.stderr, exitDeferred)
			}
			return exitDeferred
		}
	}
	if sum.Failed > 0 || sum.Interrupted > 0 || counts.SkippedFailed > 0 {
		return exitFailed
	}
	return exitOK
}

// exitSignalBase is how a death by signal N shows in an exit status:
// 128+N, as shells report it.
const exitSignalBase = 128

// countLeft counts the runs of this shard that a rerun would run: neither
// succeeded nor failed (unless --retry-failed), before or in this session.
// It reads the source again.
func (s *session) countLeft(past *runner.LedgerLog) int {
	left := 0
	for run, err := range s.o.source.open() {
		if err != nil {
			return -1
		}
		if reason, ok := s.ended[run.ID]; ok {
			if reason == runner.Interrupted {
				left++
			}
			continue
		}
		state := runner.StatePending
		if r := past.Runs[run.ID]; r != nil {
			state = r.State
		}
		if state != runner.StateSucceeded && (state != runner.StateFailed || s.o.RetryFailed) {
			left++
		}
	}
	return left
}

// stopSignals are the signals that stop a sweep: scancel and walltime
// (SIGTERM), Ctrl-C, a closed terminal or ssh session (SIGHUP), and the
// early warnings of sbatch --signal and SGE -notify.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// signalCause is the context cause recorded when a signal stops the sweep.
type signalCause struct{ sig syscall.Signal }

func (c signalCause) Error() string { return "received " + unix.SignalName(c.sig) }

// signals turns stop signals into the sweep's stop: the first cancels the
// context (every run gets SIGTERM, then SIGKILL after the grace) and says
// so at once; a second SIGINT kills every run now.
type signals struct {
	ctx    context.Context
	ch     chan os.Signal
	kill   chan struct{} // closed by a second SIGINT
	done   chan struct{}
	cancel context.CancelCauseFunc
}

func notifySignals(parent context.Context, w io.Writer, running *atomic.Int64, grace time.Duration) (context.Context, *signals) {
	ctx, cancel := context.WithCancelCause(parent)
	s := &signals{ctx: ctx, ch: make(chan os.Signal, 4), kill: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	signal.Notify(s.ch, stopSignals...)
	go func() {
		stopping := false
		for {
			select {
			case got := <-s.ch:
				sig := got.(syscall.Signal)
				switch {
				case !stopping:
					stopping = true
					cancel(signalCause{sig})
					again := ""
					if sig == syscall.SIGINT {
						again = ", Ctrl-C again to kill them now"
					}
					fmt.Fprintf(w, "nodepack: stopping on %s: %s got SIGTERM (SIGKILL after --grace %v)%s\n",
						unix.SignalName(sig), countWord(int(running.Load()), "run"), grace, again)
				case sig == syscall.SIGINT:
					fmt.Fprintln(w, "nodepack: second SIGINT: killing every run now")
					close(s.kill)
					return
				}
			case <-s.done:
				return
			}
		}
	}()
	return ctx, s
}

// killOnSecond kills the sweep on a second SIGINT, until done is closed.
func (s *signals) killOnSecond(x *runner.Execution, done <-chan struct{}) {
	select {
	case <-s.kill:
		x.Kill()
	case <-done:
	}
}

func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.done)
	s.cancel(nil)
}

// signal returns the signal that stopped the sweep, or 0.
func (s *signals) signal() syscall.Signal {
	var c signalCause
	if errors.As(context.Cause(s.ctx), &c) {
		return c.sig
	}
	return 0
}

func printSummary(w io.Writer, s runner.Summary, output string) {
	fmt.Fprintf(w, "nodepack: %s: %d succeeded, %d failed", countWord(s.Runs, "run"), s.Succeeded, s.Failed)
	if s.TimedOut > 0 {
		fmt.Fprintf(w, " (%d timed out)", s.TimedOut)
	}
	if s.Interrupted > 0 {
		fmt.Fprintf(w, ", %d interrupted", s.Interrupted)
	}
	fmt.Fprintf(w, "; %s in %v, slots %.0f%% busy\n", countWord(s.Attempts, "attempt"), s.Wall().Round(time.Millisecond), 100*s.Utilization())
	if s.Stopped {
		fmt.Fprintf(w, "nodepack: stopped starting runs after %s (--max-failures/--fail-fast)\n", countWord(s.Failed, "failure"))
	}
	for _, ev := range s.Failures {
		fmt.Fprintf(w, "  failed: %s exit %d (%s)  %s\n", ev.Run.ID, ev.ExitCode, describeFailure(ev), ev.Stderr)
	}
	if s.Failed > len(s.Failures) {
		fmt.Fprintf(w, "  … and %d more; logs are in %s\n", s.Failed-len(s.Failures), filepath.Join(output, "runs"))
	}
}

func describeFailure(ev runner.Event) string {
	parts := []string{string(ev.Reason)}
	if ev.Run.Origin != "" {
		parts = append(parts, ev.Run.Origin)
	}
	if ev.Err != nil {
		parts = append(parts, ev.Err.Error())
	}
	return strings.Join(parts, ", ")
}
