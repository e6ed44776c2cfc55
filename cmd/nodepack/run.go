package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/nodepack/nodepack/cmd/internal/console"
	"github.com/nodepack/nodepack/cmd/internal/flagvalue"
	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/sweep"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

const runUsage = `Usage: nodepack run [flags] TASKFILE
       nodepack run [flags] --sweep|--grid FILE|--params FILE [--reps N] -- COMMAND [ARGS…]
       nodepack run [flags] --search 'SEARCHER' -- COMMAND [ARGS…]

Runs every command of TASKFILE (one shell command per line; - reads
standard input), or every run of a Hydra-style sweep, YAML grid or
JSON-lines params file, or the runs a searcher proposes as lanes free, on
this node, keeping it full: each run takes the
GPUs (or share of one), CPUs and memory it asks for when it starts and
gives them back when it ends, with its CPUs pinned, thread caps, a private
TMPDIR and its own logs in OUTPUT/runs/<name>-<run-id>/. Every start and
end goes to OUTPUT/ledger.jsonl: rerunning the same command resumes.
Everything is checked before anything starts; bad input exits 2 naming
the file and line. 'nodepack status OUTPUT' shows the progress.

Examples:
  nodepack run --parallel 2 examples/tasks/hello.txt
  nodepack run --sweep -- python train.py model=convnet,transformer +iteration='range(2)' lr=0.1
  nodepack run --grid params.yml -- python train_mnist.py
  nodepack run --params runs.jsonl --reps 3 -- python train.py --out={run_dir} --seed={rep}
  seq 100 | sed 's/^/python train.py --seed=/' | nodepack run -
  nodepack run --search 'python3 examples/search/tpe.py 40' --prune loss:min,max=20 -- python3 examples/search/train.py`

// runDetails is the rest of run's --help, after its flags.
const runDetails = `Details:
Task-file lines run with bash -c (blank lines and # comments skipped; a
pipe or process substitution works too); a line that is one plain command
(words of letters, digits and _./=:,+@%^- only, not a builtin) is started
as bash would exec it, without bash's own start; sweeps, grids and params run the
command directly, no shell, with {key}, {rep}, {index}, {run_id},
{run_dir} and {params_json} filled in. Each run gets its own GPUs or its
share of one (CUDA_VISIBLE_DEVICES with full UUIDs), its own CPUs
(affinity set before it starts, OMP_NUM_THREADS and friends capped to
match), a private TMPDIR, and a directory OUTPUT/runs/<name>-<run-id>/
with stdout.log, stderr.log and, for sweeps, grids and params,
params.json. A run reports metrics by appending JSON lines ({"step": 200,
"loss": 0.41}) to the file $NODEPACK_METRICS names.

What a run asks for: the --*-per-run flags for every run; a task-file
line '#nodepack gpus=2 cpus=16' for the lines after it (until the next
such line; '#nodepack' alone goes back to the flags); a params line's
"nodepack" object, {"lr": 0.1, "nodepack": {"gpus": 0.25}}; and for
sweeps, grids and params, --request 'model=big: gpus=2' rules matched on
a run's values. Keys: gpus (2, or a share of one GPU: 0.25, 1/4),
gpu_mem (12GiB: share GPUs while the memory fits; auto measures), cpus,
mem. Runs start in input order; a smaller run may start ahead of a larger
one that does not fit yet, for at most --backfill-wait. A request that
can never fit this node exits 2 before anything starts.

Everything is checked before anything starts: every line of the input
(bash must be able to parse each task line), the program every run
starts, the plan, the output directory. Bad input exits 2 with one line
naming the file and line.

Every start and end is appended to OUTPUT/ledger.jsonl (one file per
shard), which records what defines the sweep: its source, command,
--env and --wrap. Rerunning the same command resumes: runs that succeeded
are skipped, interrupted ones (also those running when nodepack was
killed, and those that ended by a SIGTERM, SIGINT or SIGHUP nodepack did
not send: a batch system's cancel reaches runs first) run again, failed
ones only with --retry-failed, new ones (a
grown task file or grid, more --reps) run; --restart starts over. Runs
must therefore tolerate being run again. A rerun into a directory that
holds another sweep (another source, command, --env or --wrap) is refused.
OUTPUT defaults to nodepack-NAME-KEY (NAME from the task file or script,
KEY a hash of the sweep's definition), and inside a batch job to
nodepack-JOBID-NAME-KEY (the array's id for a sharded array job), so a
requeued job resumes; the first line printed names it. 'nodepack status
OUTPUT' shows the progress from any shell ('nodepack status nodepack-JOBID'
finds a job's). -o nodepack-JOBID, when there is no such directory but
the same sweep ran in that job's default one, resumes it there.

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
shard i mod N. With --pool auto they are one pool instead: each claims
the next runs of the whole sweep as its lanes free (DIR/claims), and the
others take over the runs of one whose heartbeat stops for --lease.

--search starts the searcher once (sh -c, its stderr to OUTPUT/search.log)
and, in JSON lines on its stdin and stdout, asks it for a run's
parameters as a lane is about to free and tells it how each run ended;
a resumed sweep tells a new searcher what ended before and runs the
interrupted runs again (docs/search.md, the protocol).`

// runOptions are run's flags, bound into the library's own options where
// they are one: runner.Options, its Source (a sweep.Spec) and its Execute
// options. The rest say which node, and how to talk about the sweep.
type runOptions struct {
	nodeOptions
	packOptions
	runner.Options
	DryRun         bool
	JSON           bool
	Wrap           string // split into Execute.Wrap
	GPUIDs         string // Execute.GPUIDs
	MPS            string // Execute.MPS
	FailFast       bool   // Execute.MaxFailures = 1
	Live           bool
	Quiet          bool
	SampleInterval time.Duration
	memNote        string          // how --enforce-mem holds the runs, said at the start
	shape          *resources.Node // for submit: check against this node, not the one here
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	x := &o.Execute
	o.packOptions.AddFlags(fs)
	fs.BoolVar(&o.DryRun, "dry-run", false, "list the runs (id, index, shard, request, added env, argv) and start nothing")
	fs.BoolVar(&o.JSON, "json", false, "with --dry-run: print the runs as a JSON document (schema nodepack.runs/v1)")
	addSourceFlags(fs, &o.Source, &o.RunsPerShard)
	fs.StringVar(&o.Source.Search, "search", "", "run the command after -- once per proposal of the searcher `CMD` (run with sh -c, its stderr to DIR/search.log): asked for the next run's parameters as a lane is about to free, told how each run ended, in JSON lines on its stdin and stdout (docs/search.md)")
	fs.DurationVar(&o.SearchTimeout, "search-timeout", runner.DefaultSearchTimeout, "with --search, stop the searcher and start no more runs when it takes longer than `D` to answer")
	fs.StringVar(&o.Shard, "shard", "auto", "run only shard `I/N`: the runs whose index is I mod N; auto takes it from the array index and task rank (SLURM_ARRAY_TASK_ID, SLURM_PROCID, SGE_TASK_ID, PBS_ARRAY_INDEX, LSB_JOBINDEX); none runs all")
	fs.StringVar(&o.Pool, "pool", "", "run as task `NAME` of a shared pool (auto: named by the batch job's array task): the tasks of a submission, on their own nodes, claim the runs of the whole sweep from one output directory as their lanes free, instead of a fixed shard, and take over the runs of a task whose heartbeat stops for --lease")
	fs.DurationVar(&o.Lease, "lease", 0, "with --pool, how long a task's heartbeat (renewed every sixth of `D`, in DIR/claims) may stand still before the other tasks take its runs over; a task that cannot renew it stops its own runs half a lease after its last renewal (default 3m0s, or three times the output directory's NFS caches where they are longer; at least six times --grace)")
	fs.DurationVar(&x.BackfillWait, "backfill-wait", schedule.DefaultBackfillWait, "let smaller runs start ahead of one that does not fit yet for at most `D`, then keep what frees up for it; 0 starts runs strictly in order")
	fs.DurationVar(&x.DensityWindow, "density-window", schedule.DefaultDensityWindow, "with --runs-per-gpu auto, read each run's steps per second over `D` with no run joining or leaving its GPU")
	fs.DurationVar(&x.SettleTimeout, "settle-timeout", schedule.DefaultSettleTimeout, "a run sharing a GPU by --gpu-mem-per-run keeps other runs off it until its GPU memory stops growing, or for at most `D`")
	fs.StringVarP(&o.Output, "output", "o", "", "`DIR` for the ledger and logs (DIR/runs/<name>-<run-id>/); default nodepack-NAME-KEY, in a batch job nodepack-JOBID-NAME-KEY")
	fs.BoolVar(&o.RetryFailed, "retry-failed", false, "when resuming, also run again the runs that failed")
	fs.Var(flagvalue.Classes(&o.RetryClasses), "retry-class", "with --retry-failed, only the failed runs of failure class `CLASS` (repeatable; see nodepack retry)")
	clidoc.OfferChoices(fs, "retry-class", classNames()...)
	fs.StringArrayVar(&o.RetryRuns, "retry-run", nil, "with --retry-failed, only the failed run `ID` (repeatable)")
	fs.BoolVar(&o.Restart, "restart", false, "start over: keep the old ledger as a backup and run everything from scratch (the runs' old checkpoints and metrics are set aside as NAME.<time>.old; also when DIR holds another sweep)")
	fs.BoolVar(&o.Requeue, "requeue", false, "when stopped by SIGUSR1/SIGUSR2 (sbatch --signal) or --stop-before with runs left, have the batch system run this job again (Slurm: scontrol requeue; Grid Engine: exit 99); never on SIGTERM (scancel)")
	fs.DurationVar(&o.StopBefore, "stop-before", 0, "start no runs `D` before the job's end (Slurm: SLURM_JOB_END_TIME or squeue, followed while the job runs; Grid Engine: h_rt) and stop running ones in time for --grace; a job without a time limit, or whose end is not known, runs to its end with a note; 0 means off")
	fs.DurationVar(&o.SampleInterval, "sample-interval", 10*time.Second, "measure each run's process tree and GPUs every `D`; 0 means only the kernel's totals")
	fs.DurationVar(&x.Stagger, "stagger", 0, "fill the node gradually: lane k of the first wave (as many as fit at once) opens k×`D` after the start, its first run on GPUs of its own while there are; an open lane takes the next run at once")
	fs.DurationVar(&x.MinStartInterval, "min-start-interval", 0, "at least `D` between any two starts")
	fs.DurationVar(&x.Timeout, "timeout", 0, "stop a run after `D` (SIGTERM, then SIGKILL after --grace); 0 means none")
	fs.Var(flagvalue.Signal(&x.CheckpointSignal), "checkpoint-signal", "before any stop of nodepack's (--stop-before, the requeue signal, a cancel, --timeout, --prune) send `SIG` (USR1, USR2, HUP, INT, …) to a run that has saved a checkpoint ($NODEPACK_CHECKPOINT_DIR, a {\"checkpoint\": STEP} line) and wait up to --grace for a new one before SIGTERM")
	fs.DurationVar(&x.Grace, "grace", execute.DefaultGrace, "time between SIGTERM and SIGKILL; 0 sends SIGKILL right after SIGTERM")
	fs.IntVar(&x.Retries, "retries", 0, "run a failed or timed-out run up to `N` more times (not host-oom and not-found: see --retry)")
	fs.Var(flagvalue.RetryBudgets(&x.Retry), "retry", "retry budgets per failure class, `CLASS=N[,CLASS=N]` (repeatable): cuda-oom, gpu-mem, host-oom, gpu-error, disk-full, io-error, setup, not-found, timeout, signal, exit; a class not named gets --retries")
	fs.DurationVar(&x.RetryBackoff, "retry-backoff", time.Second, "wait `D` before a run's first retry, twice that before the next, up to a minute; the run keeps its GPUs and CPUs")
	fs.Var(flagvalue.FailPatterns(&x.FailPatterns), "fail-pattern", "name a failure's class by its stderr: `CLASS=REGEX` (repeatable), matched before the built-in patterns of PyTorch, TensorFlow, JAX, CUDA, NCCL and ENOSPC")
	fs.BoolVar(&x.EnforceMem, "enforce-mem", false, "kill a run whose processes use more than the mem it asked for (host-oom): the kernel holds it to it in a memory cgroup of its own where nodepack may make one, else nodepack checks it every "+execute.MemCheckInterval.String())
	fs.IntVar(&x.MaxFailures, "max-failures", 0, "start no new runs after `N` failures; 0 means keep going")
	fs.BoolVar(&o.FailFast, "fail-fast", false, "start no new runs after the first failure (--max-failures 1)")
	fs.StringVar(&o.GPUIDs, "gpu-ids", "uuid", "how CUDA_VISIBLE_DEVICES names GPUs: uuid or index")
	clidoc.OfferChoices(fs, "gpu-ids", "uuid", "index")
	fs.StringVar(&o.MPS, "mps", "off", "share GPUs through an MPS control daemon of the sweep's own: `MODE` auto (when runs share a GPU and nvidia-cuda-mps-control is there; each held by the driver to its gpu_mem), on (as auto, refused without the program) or off")
	clidoc.OfferChoices(fs, "mps", "auto", "on", "off")
	fs.BoolVar(&x.MPSCompute, "mps-compute", false, "with --mps, also hold each run to its share of the GPU's compute (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE): its GPU share, or its gpu_mem's part of the GPU's memory")
	fs.BoolVar(&x.Render, "render", false, "also set EGL_DEVICE_ID, MUJOCO_EGL_DEVICE_ID and PYGLET_HEADLESS_DEVICE")
	fs.BoolVar(&x.NoThreadCaps, "no-thread-caps", false, "do not set OMP_NUM_THREADS, MKL_NUM_THREADS, … to the run's CPU count")
	fs.StringArrayVar(&x.Env, "env", nil, "set `K=V` in every run (repeatable); K alone takes nodepack's own value of K; V may use {run_id}, {run_dir}, {index}, {rep} and {attempt}")
	fs.StringVar(&o.Wrap, "wrap", "", "put `PREFIX` before every run, e.g. 'ch-run --set-env=config.env img --'")
	fs.Var(flagvalue.Prune(&x.Prune, &x.PruneInterval), "prune", "stop runs early by the metric they report, `SPEC` such as loss:min,max=2700 (keys: eta=3, first, max, rule=forecast|asha|median|curve, every=1s): at the steps first, first×eta, … below max, a run outside the best 1/eta of those that reached the step before is stopped and pruned (neither failed nor run again), or paused when it keeps checkpoints in $NODEPACK_CHECKPOINT_DIR (resumed from its checkpoint once nothing waits to start and it may still win); with max and no first the rule is forecast (first max/8, at least 1; between those steps a run is also stopped once the sweep's finished runs forecast that even the optimistic end of its 95% interval misses the best final; one run in four is judged only from max/3 on), with first it is asha; rule=curve judges where its curve is going: stopped only when even its optimistic forecast at max is outside the best 1/eta of the forecasts before it")
	fs.StringArrayVar(&o.PrunePrior, "prune-prior", nil, "let --prune's forecast rule learn from an earlier sweep's output `DIR` (repeatable): its runs of the same metric, their steps mapped by their fraction of its last step; used once this sweep's own runs agree with it (4 of them at the first rung, 2 finished where it forecast), dropped for good when they do not; its best final is never a bar by itself")
	fs.Var(flagvalue.Metrics(&x.Metrics), "metric", "a per-step metric from each run's stdout: `NAME=REGEX`, its group named value (else its first) at the step its group named step gives (else the next), recorded in the ledger with what the run appends to $NODEPACK_METRICS (repeatable)")
	fs.BoolVar(&o.Live, "live", false, "also stream every run's output, each line prefixed with where the run comes from (tasks.txt:12)")
	fs.BoolVarP(&o.Quiet, "quiet", "q", false, "report only failures and the summary")
	o.nodeOptions.AddFlags(fs)
}

// finish checks the flags and completes the library's options from them
// and from the positional arguments.
func (o *runOptions) finish(args []string) error {
	x := &o.Execute
	for name, d := range map[string]time.Duration{"--stagger": x.Stagger, "--min-start-interval": x.MinStartInterval, "--timeout": x.Timeout, "--grace": x.Grace,
		"--stop-before": o.StopBefore, "--sample-interval": o.SampleInterval} {
		if d < 0 {
			return fmt.Errorf("%s %v: must not be negative", name, d)
		}
	}
	if x.Retries < 0 || x.MaxFailures < 0 {
		return errors.New("--retries and --max-failures must not be negative")
	}
	if x.RetryBackoff < 0 {
		return fmt.Errorf("--retry-backoff %v: must not be negative", x.RetryBackoff)
	}
	if o.JSON && !o.DryRun {
		return errors.New("--json goes with --dry-run")
	}
	if o.DryRun && o.Source.Search != "" {
		return errors.New("--dry-run lists the runs before anything starts, and a --search searcher proposes them as the sweep goes: there are none to list")
	}
	if o.Restart && o.RetryFailed {
		return errors.New("--restart reruns everything: --retry-failed goes with a resume")
	}
	if o.Shard != "auto" && o.Shard != "none" {
		if _, err := sweep.ParseShard(o.Shard); err != nil {
			return fmt.Errorf("--shard: %w", err)
		}
		if o.Pool != "" {
			return errors.New("--pool claims runs from the whole sweep: it goes without --shard")
		}
	}
	if o.Lease < 0 {
		return fmt.Errorf("--lease %v: must be more than 0", o.Lease)
	}
	if o.SearchTimeout <= 0 {
		return fmt.Errorf("--search-timeout %v: must be more than 0", o.SearchTimeout)
	}
	if o.Source.Search != "" && o.Pool != "" {
		return errors.New("--search runs its searcher on one node: it goes without --pool")
	}
	if o.FailFast {
		x.MaxFailures = 1
	}
	if x.Grace == 0 {
		x.Grace = execute.NoGrace // --grace 0: none, not the library's default
	}
	if x.BackfillWait == 0 {
		x.BackfillWait = -1 // --backfill-wait 0: strictly in order
	}
	if x.SettleTimeout <= 0 {
		return fmt.Errorf("--settle-timeout %v: must be more than 0", x.SettleTimeout)
	}
	if x.DensityWindow <= 0 {
		return fmt.Errorf("--density-window %v: must be more than 0", x.DensityWindow)
	}
	if o.AutoGPUMem && o.SampleInterval == 0 {
		return errors.New("--gpu-mem-per-run auto measures the runs: it needs --sample-interval above 0")
	}
	switch mode := execute.GPUIDMode(o.GPUIDs); mode {
	case execute.GPUUUIDs, execute.GPUIndices:
		x.GPUIDs = mode
	default:
		return fmt.Errorf("--gpu-ids %q: want uuid or index", o.GPUIDs)
	}
	if x.MPSCompute && o.MPS == "off" {
		return errors.New("--mps-compute goes with --mps auto or --mps on")
	}
	switch o.MPS {
	case "off":
		x.MPS = execute.MPSOff
	case "auto", "on":
		x.MPS = execute.MPSMode(o.MPS)
	default:
		return fmt.Errorf("--mps %q: want auto, on or off", o.MPS)
	}
	env, err := flagvalue.ResolveEnv(x.Env, os.LookupEnv)
	if err != nil {
		return err
	}
	x.Env = env
	if o.Wrap != "" {
		if x.Wrap, err = flagvalue.SplitWords(o.Wrap); err != nil {
			return fmt.Errorf("--wrap: %w", err)
		}
	}
	return sourceArgs(&o.Source, args)
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o runOptions
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.AddFlags(fs)
	if code, ok := parseFlags(ctx, fs, runUsage, args, stdout, stderr); !ok {
		return code
	}
	// nodepack's own output never blocks the sweep, and a reader that
	// goes away (| head) does not kill it: SIGPIPE is EPIPE (program),
	// which the console counts on standard error.
	errOut, outOut := console.New(stderr), console.New(stdout)
	defer func() {
		outOut.Close(consoleWait)
		if dropped := errOut.Close(consoleWait); dropped > 0 {
			fmt.Fprintf(stderr, "nodepack: %d lines of its own output could not be written (the ledger and the run logs are complete)\n", dropped)
		}
	}()
	// What follows the sweep is set up front; the progress it reports to
	// needs the sweep's size, known once it is prepared.
	var progress *progress
	o.Execute.OnEvent = func(ev run.Event) { progress.event(ev) }
	if o.Live {
		o.Execute.Live = writerFunc(func(b []byte) (int, error) { return progress.live(outOut, b) })
	}
	// Until the sweep has started, what nodepack says waits: a start
	// refused (the ledger cannot be opened) is one line, exit 2.
	head := &heldWriter{w: errOut}
	o.OnNote = func(line string) { printNotes(head, []string{line}) }
	sw, node, err := o.prepare(ctx, fs.Args(), args)
	if err != nil {
		return usageErrorf(errOut, "run", "%v", err)
	}
	defer sw.Close()
	if o.DryRun {
		printNotes(errOut, sw.Notes())
		return dryRun(sw.Sweep, o.JSON, outOut, errOut)
	}
	fmt.Fprintf(head, "nodepack: output %s (nodepack status %s)\n", termSafe(sw.Output()), shellWord(sw.Output()))
	printWarnings(head, node.Warnings)
	printWarnings(head, noteTexts(sw.Plan.Warnings))
	printNotes(head, sw.Notes())
	if o.memNote != "" {
		printNotes(head, []string{o.memNote})
	}
	shardTotal, _ := sw.Total()
	if o.Source.Search != "" {
		shardTotal = -1 // the searcher proposes the runs as they go
	}
	progress = newProgress(errOut, shardTotal, sw.Done(), o.Quiet)
	return o.run(ctx, sw.Sweep, progress, head)
}

// heldWriter holds what is written to it until release, then writes it
// to w, and from then on writes straight through; discard drops what it
// held. Safe for concurrent use.
type heldWriter struct {
	mu       sync.Mutex
	w        io.Writer
	held     []byte
	released bool
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.w.Write(p)
	}
	h.held = append(h.held, p...)
	return len(p), nil
}

func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.released {
		h.w.Write(h.held)
		h.held, h.released = nil, true
	}
}

func (h *heldWriter) discard() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.released = nil, true
}

// consoleWait is how long nodepack waits for its own output to be written
// out when it ends.
const consoleWait = 2 * time.Second

// prepare checks everything before anything starts: the node, the plan,
// and what runner.Prepare checks.
func (o *runOptions) prepare(ctx context.Context, positional, args []string) (*nodepack.Sweep, resources.Node, error) {
	var node resources.Node
	if err := o.finish(positional); err != nil {
		return nil, node, err
	}
	var err error
	if o.shape != nil {
		node = *o.shape // nodepack submit: the node a job asks for
	} else if node, err = o.load(ctx); err != nil {
		return nil, node, err
	}
	if o.Inventory != "" && o.shape == nil {
		here, err := resources.Detect(ctx, resources.Options{})
		if err != nil {
			return nil, node, err
		}
		if err := node.Within(here); err != nil {
			return nil, node, fmt.Errorf("--inventory: %w: plan with --inventory, run with the node's own", err)
		}
	}
	o.Node = node
	o.Job = batch.Detect(os.LookupEnv) // this process's job, also with --inventory
	if o.shape != nil {
		o.Job = batch.Job{} // checked for jobs yet to start
	}
	o.Version, o.Command = nodepackVersion(), append([]string{"nodepack", "run"}, args...)
	o.Source.CheckShell = true
	o.CheckPrograms = !o.DryRun // a dry run may list runs for another machine
	interval := o.SampleInterval
	if interval == 0 {
		interval = -1 // --sample-interval 0: not measured
	}
	// The node wired as every embedder gets it: the sampler, the OOM
	// counter, memory cgroups for --enforce-mem, the GPU-fault watcher.
	sw, err := nodepack.Prepare(ctx, nodepack.Options{Options: o.Options, Node: &node, Pack: &o.packOptions.Options, SampleInterval: interval})
	var fitErr *pack.FitError
	if errors.As(err, &fitErr) {
		return nil, node, errors.New(strings.Replace(err.Error(), fitErr.Error(), fitErr.Words(flagWord), 1))
	}
	var memErr *nodepack.MemLimitError
	if errors.As(err, &memErr) {
		return nil, node, fmt.Errorf("--enforce-mem: no memory cgroup can be made here (%v), and --sample-interval 0 turns off the sampler that would check the runs instead", memErr.Why)
	}
	var priorErr *runner.PriorError
	if errors.As(err, &priorErr) {
		return nil, node, priorWords(priorErr)
	}
	var conflict *runner.ConflictError
	if errors.As(err, &conflict) {
		return nil, node, fmt.Errorf("%s holds another sweep: %s; --restart starts over (the old ledger is kept as a backup), or choose another -o",
			conflict.Dir, strings.Join(conflict.Changes, "; "))
	}
	if err != nil {
		return nil, node, err
	}
	o.memNote = o.enforceMemNote(sw.MemCgroup, sw.NoMemCgroup, sw.Plan.Request)
	for i, w := range sw.Plan.Warnings {
		sw.Plan.Warnings[i] = wordedNote(w.Words(flagWord)) // as the ledger's header records them
	}
	sw.SetPlan(sw.Plan)
	return sw, node, nil
}

// enforceMemNote says how --enforce-mem holds the runs to their mem: in
// memory cgroups in dir, else (none for whyNot) by the sampler's checks;
// "" without it.
func (o *runOptions) enforceMemNote(dir string, whyNot error, each pack.Request) string {
	if !o.Execute.EnforceMem {
		return ""
	}
	note := "--enforce-mem: a run that asks for mem runs in a memory cgroup of its own in " + dir + ", limited to it"
	if dir == "" {
		note = fmt.Sprintf("--enforce-mem: no memory cgroup can be made here (%v): nodepack checks the memory of a run that asks for mem every %v, and kills it when it is over", whyNot, execute.MemCheckInterval)
	}
	if each.Mem == 0 {
		// Said, lest a user take the flag alone for a limit on every run.
		note += "; runs ask for no mem unless their lines say mem= (or give --mem-per-run), and those are not limited"
	}
	return note
}

// run runs the prepared sweep, reports, and returns the exit status.
func (o *runOptions) run(ctx context.Context, sw *runner.Sweep, progress *progress, head *heldWriter) int {
	var started atomic.Pointer[runner.Session]
	var stopSig atomic.Int32
	var killNow atomic.Bool
	grace := o.Execute.GracePeriod()
	ctx, stopNotify := nodepack.NotifyStop(ctx, func(sig syscall.Signal, before int) {
		switch {
		case before == 0:
			stopSig.Store(int32(sig))
			// Counted before the cancel: a run that ends on its SIGTERM
			// at once has still been sent one.
			n := 0
			if s := started.Load(); s != nil {
				n = s.Running()
			}
			again := ""
			if sig == syscall.SIGINT {
				again = ", Ctrl-C again to kill them now"
			}
			fmt.Fprintf(head, "nodepack: stopping on %s: %s got SIGTERM (SIGKILL after --grace %v)%s\n", unix.SignalName(sig), countWord(n, "run"), grace, again)
		case sig == syscall.SIGINT && !killNow.Swap(true):
			fmt.Fprintln(head, "nodepack: second SIGINT: killing every run now")
			if s := started.Load(); s != nil {
				s.Kill()
			}
		}
	})
	defer stopNotify()
	stderr := head.w
	session, err := sw.Start(ctx)
	if err != nil {
		head.discard() // the start was refused: its one line, no more
		return usageErrorf(stderr, "run", "%v", err)
	}
	head.release()
	started.Store(session)
	if killNow.Load() {
		session.Kill() // a second SIGINT came while it started
	}
	printWarnings(stderr, session.Ledger().Warnings())
	if b := session.Ledger().Backup(); b != "" {
		fmt.Fprintf(stderr, "nodepack: --restart: the old ledger is now %s\n", termSafe(b))
	}
	printResuming(stderr, session.Ledger().Past(), len(session.Retired()), o.RetryFailed, len(o.RetryClasses)+len(o.RetryRuns) > 0)
	out, err := session.Wait()
	progress.finish()
	sig := syscall.Signal(0)
	if ctx.Err() != nil {
		sig = syscall.Signal(stopSig.Load())
	}
	return report(stderr, out, err, sig, o, sw.Output(), progress.failuresOnly())
}

// waitErrors splits the error of runner.Session.Wait into the runner's
// own, the ledger's and the requeue's, which nodepack reports apart.
func waitErrors(err error) (runErr error, ledgerErr *runner.LedgerError, requeueErr *runner.RequeueError) {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var rest []error
	for _, e := range errs {
		switch {
		case e == nil:
		case errors.As(e, &ledgerErr), errors.As(e, &requeueErr):
		default:
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...), ledgerErr, requeueErr
}

// report prints how the sweep ended and returns the exit status.
// output is the sweep's output directory (the one nodepack named, when -o
// was not given); listed says each failure was printed as it happened,
// among few other lines (-q, or a progress bar), so the summary does not
// list them again.
func report(w io.Writer, out runner.Outcome, err error, sig syscall.Signal, o *runOptions, output string, listed bool) int {
	sum := out.Summary
	if c := out.Resumed; sum.Runs == 0 && sum.Attempts == 0 && skippedBefore(c) > 0 && sig == 0 {
		// A resume that found everything done: say so, not "0 runs".
		fmt.Fprintf(w, "nodepack: nothing left to run: %s; nodepack status %s shows them, --restart runs everything again\n", doneBefore(c, output), shellWord(output))
	} else {
		printSummary(w, sum, output, listed)
		printSkipped(w, out.Resumed)
	}
	runErr, ledgerErr, requeueErr := waitErrors(err)
	switch {
	case ledgerErr != nil && ledgerErr.Lost:
		fmt.Fprintf(w, "nodepack: stopped starting runs: %v; the ledger holds every record written before, and a rerun runs the rest again\n", termSafe(ledgerErr.Error()))
	case ledgerErr != nil:
		fmt.Fprintf(w, "nodepack: stopped starting runs: %v; rerun the same command to run the rest\n", termSafe(ledgerErr.Error()))
	}
	if sig != 0 {
		fmt.Fprintf(w, "nodepack: stopped by %s: %s interrupted; rerun the same command to run them again\n", unix.SignalName(sig), countWord(sum.Interrupted, "run"))
	} else if sum.OutsideStops > 0 {
		fmt.Fprintf(w, "nodepack: %s ended by SIGTERM, SIGINT or SIGHUP that nodepack did not send (a cancel, a kill): interrupted, not failed; rerun the same command to run them again\n",
			countWord(sum.OutsideStops, "run"))
	}
	if runErr != nil && sig == 0 {
		fmt.Fprintf(w, "nodepack run: %s\n", termSafe(runErr.Error()))
		disk := ""
		switch {
		case errors.Is(runErr, syscall.ENOSPC), errors.Is(runErr, syscall.EDQUOT):
			disk = "disk full (or a quota reached)"
		case errors.Is(runErr, syscall.EIO):
			disk = "disk I/O error"
		}
		if disk != "" {
			fmt.Fprintf(w, "nodepack: stopped starting runs: %s; the runs it stopped are interrupted, not failed: once the disk is fixed, rerun the same command to run them\n", disk)
		}
	}
	if sum.Drained && runErr == nil && ledgerErr == nil && sig == 0 {
		fmt.Fprintf(w, "nodepack: stopped starting runs %v before the job's end (--stop-before): %s deferred to the requeue; rerun the same command to run them\n",
			o.StopBefore, countWord(out.Left, "run"))
	}
	switch {
	case out.Requeued && o.Job.Kind == batch.SGE:
		fmt.Fprintf(w, "nodepack: exiting %d so that Grid Engine reschedules job %s\n", out.RequeueExit, o.Job.JobID)
	case out.Requeued:
		fmt.Fprintf(w, "nodepack: requeued job %s: it resumes where this one stopped\n", o.Job.JobID)
	case requeueErr != nil:
		fmt.Fprintf(w, "nodepack: %s\n", termSafe(requeueErr.Error()))
	}
	return exitStatus(out, err, sig)
}

// exitStatus is the exit status of a sweep that ended as out, stopped by
// signal sig (0 if none): a requeue's own status where it has one (Grid
// Engine's 99), 128+N for a signal, 2 when nothing ran for a bad input
// further down the source, 1 when runs failed (now or before) or the
// ledger could not be kept, 3 when --stop-before deferred runs, else 0.
func exitStatus(out runner.Outcome, err error, sig syscall.Signal) int {
	sum := out.Summary
	runErr, ledgerErr, _ := waitErrors(err)
	switch {
	case out.Requeued && out.RequeueExit != 0:
		return out.RequeueExit
	case sig != 0:
		return run.ExitSignalBase + int(sig)
	case runErr != nil && sum.Runs == 0:
		return exitUsage
	case runErr != nil, ledgerErr != nil:
		return exitFailed
	case sum.Drained && out.Left != 0:
		return exitDeferred
	case sum.Failed > 0, sum.Interrupted > 0, out.Resumed.SkippedFailed > 0:
		return exitFailed
	}
	return exitOK
}

// priorWords words a prior the sweep cannot learn from as the flags say
// it.
func priorWords(e *runner.PriorError) error {
	switch {
	case errors.Is(e, runner.ErrPriorPolicy):
		return errors.New("--prune-prior goes with --prune")
	case errors.Is(e, runner.ErrPriorRule):
		return errors.New("--prune-prior goes with --prune's forecast rule: max= with no first= and no rule=, or rule=forecast")
	}
	return fmt.Errorf("--prune-prior %s: %v", e.Dir, e.Err)
}

// priorSummary says what the prune prior did in a session.
func priorSummary(p schedule.PriorState) string {
	stopped := countWord(p.Stopped, "run")
	switch {
	case p.Dropped != "":
		return fmt.Sprintf("--prune-prior was dropped (%s); before that it helped stop %s", p.Dropped, stopped)
	case p.On:
		return fmt.Sprintf("--prune-prior was in use: it helped stop %s (checked by %d runs at the first rung, %d finished)", stopped, p.Checked, p.Finished)
	}
	return fmt.Sprintf("--prune-prior was not used: this sweep's own runs had not yet shown it agrees (%d of 4 at the first rung, %d of 2 finished where it forecast); it helped stop %s", p.Checked, p.Finished, stopped)
}

func printSummary(w io.Writer, s execute.Summary, output string, listed bool) {
	fmt.Fprintf(w, "nodepack: %s: %d succeeded", countWord(s.Runs, "run"), s.Succeeded)
	if s.Pruned > 0 {
		fmt.Fprintf(w, ", %d pruned", s.Pruned)
	}
	if s.Paused > 0 || s.Promoted > 0 {
		fmt.Fprintf(w, ", %d paused (%s)", s.Paused, countWord(s.Promoted, "promotion"))
	}
	fmt.Fprintf(w, ", %d failed", s.Failed)
	if s.Failed > 0 {
		fmt.Fprintf(w, " (%s)", failure.Counts(s.Classes))
	}
	if s.Interrupted > 0 {
		fmt.Fprintf(w, ", %d interrupted", s.Interrupted)
	}
	fmt.Fprintf(w, "; %s in %v, lanes %.0f%% busy\n", countWord(s.Attempts, "attempt"), s.Wall().Round(time.Millisecond), 100*s.Utilization())
	if f := s.Forecasts; f.Forecasts > 0 {
		asked := "95% asked"
		if len(s.Prior.Uses) > 0 {
			asked = "95% asked, 90% at every rung at once while the prior was in use"
		}
		fmt.Fprintf(w, "nodepack: --prune's forecasts held for %d of the %s forecast while they ran (their optimistic end at most their final: %s)\n", f.Held, countWord(f.Forecasts, "finished run"), asked)
	}
	if p := s.Prior; len(p.Uses) > 0 {
		fmt.Fprintf(w, "nodepack: %s\n", termSafe(priorSummary(p)))
	}
	if s.Stopped {
		fmt.Fprintf(w, "nodepack: stopped starting runs after %s (--max-failures/--fail-fast)\n", countWord(s.Failed, "failure"))
	}
	if listed && s.Failed > 0 {
		fmt.Fprintf(w, "  the failures are above; nodepack status --failed %s shows them with their stderr\n", shellWord(output))
	}
	for _, ev := range s.Failures {
		if listed {
			break
		}
		fmt.Fprintf(w, "  failed: %s %s (%s)  %s\n", termSafe(ev.Run.ID), ev.Class, termSafe(describeFailure(ev)), termSafe(ev.Stderr))
		printTail(w, ev.StderrTail)
	}
	if s.Failed > len(s.Failures) && !listed {
		fmt.Fprintf(w, "  … and %d more; logs are in %s\n", s.Failed-len(s.Failures), filepath.Join(output, "runs"))
	}
	for _, f := range s.GPUsOut {
		fmt.Fprintf(w, "nodepack: GPU %s was taken out of use after %s at %s\n", termSafe(f.UUID), termSafe(f.Reason), f.Time.Local().Format(time.DateTime))
	}
	if s.NoGPUsLeft {
		fmt.Fprintln(w, "nodepack: no GPU was left in use, so no more runs started; rerun on a healthy node to resume")
	}
	for _, hint := range nextSteps(s.Classes, output) {
		fmt.Fprintln(w, "nodepack: "+termSafe(hint))
	}
}

func describeFailure(ev run.Event) string {
	parts := []string{fmt.Sprint("exit ", ev.ExitCode)}
	if ev.Signal != "" {
		parts[0] = ev.Signal
	}
	if ev.Attempt > 1 {
		parts = append(parts, countWord(ev.Attempt, "attempt"))
	}
	if ev.Run.Origin != "" {
		parts = append(parts, ev.Run.Origin)
	}
	if ev.Err != nil {
		parts = append(parts, ev.Err.Error())
	}
	return strings.Join(parts, ", ")
}

// printTail prints a failed run's last stderr lines under it.
func printTail(w io.Writer, lines []string) {
	for _, line := range lines {
		fmt.Fprintf(w, "      | %s\n", termSafe(line))
	}
}
