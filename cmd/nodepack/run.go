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
	"strings"
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
bash -c; blank lines and # comments are skipped; - reads standard input),
or every run of a Hydra-style sweep, YAML grid or JSON-lines params file
(executed directly, no shell; {key}, {rep}, {index}, {run_id}, {run_dir}
fill in the arguments), on this node, as many at once as the plan has slots. Each run gets its own
GPUs (CUDA_VISIBLE_DEVICES with full UUIDs), its own CPUs (affinity set
before it starts, OMP_NUM_THREADS and friends capped to match), a private
TMPDIR, and logs in OUTPUT/runs/<run-id>/{stdout,stderr}.log.

Every start and end is appended to OUTPUT/ledger.jsonl (one file per
shard). Rerunning the same command resumes: runs that succeeded are
skipped, interrupted ones (also those running when nodepack was killed)
run again, failed ones only with --retry-failed; --restart starts over.
Runs must therefore tolerate being run again. Inside a batch job OUTPUT
defaults to nodepack-JOBID (the array's id for a sharded array job), so a
requeued job resumes; elsewhere to nodepack-out. 'nodepack status OUTPUT'
shows the progress from any shell.

Exit status: 0 all runs succeeded, 1 some failed (now or before, when
skipped), 2 bad usage or input (also an unwritable OUTPUT or a corrupt
ledger: nothing started), 3 stopped by --stop-before with runs left for a
requeue, 128+N when stopped by signal N (130 for SIGINT, 143 for SIGTERM).
On SIGTERM, SIGINT, SIGUSR1 or SIGUSR2 nodepack starts no more runs, sends
SIGTERM to every run's process group and SIGKILL after --grace; a second
SIGINT kills at once.

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

type runOptions struct {
	nodeOptions
	packOptions
	source           sourceOptions
	Output           string
	Stagger          time.Duration
	MinStartInterval time.Duration
	Timeout          time.Duration
	Grace            time.Duration
	Retries          int
	MaxFailures      int
	FailFast         bool
	GPUIDs           string
	Render           bool
	NoThreadCaps     bool
	Env              []string
	Wrap             string
	Live             bool
	Quiet            bool
	RetryFailed      bool
	Restart          bool
	StopBefore       time.Duration
	Requeue          bool
	SampleInterval   time.Duration
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	o.packOptions.AddFlags(fs)
	o.source.AddFlags(fs)
	fs.StringVarP(&o.Output, "output", "o", "", "`DIR` for the ledger and logs (DIR/runs/<run-id>/); default nodepack-<job id> in a batch job, else nodepack-out")
	fs.BoolVar(&o.RetryFailed, "retry-failed", false, "when resuming, also run again the runs that failed")
	fs.BoolVar(&o.Restart, "restart", false, "start over: keep the old ledger as a backup and run everything")
	fs.BoolVar(&o.Requeue, "requeue", false, "when stopped by SIGUSR1/SIGUSR2 (sbatch --signal) or --stop-before with runs left, have the batch system run this job again (Slurm: scontrol requeue; Grid Engine: exit 99); never on SIGTERM (scancel)")
	fs.DurationVar(&o.StopBefore, "stop-before", 0, "start no runs `D` before the job's end (SLURM_JOB_END_TIME) and stop running ones in time for --grace; 0 means off")
	fs.DurationVar(&o.SampleInterval, "sample-interval", 10*time.Second, "measure each run's process tree and GPUs every `D`; 0 means only the kernel's totals")
	fs.DurationVar(&o.Stagger, "stagger", 0, "start slot i's first run i×`D` after the start")
	fs.DurationVar(&o.MinStartInterval, "min-start-interval", 0, "at least `D` between any two starts")
	fs.DurationVar(&o.Timeout, "timeout", 0, "stop a run after `D` (SIGTERM, then SIGKILL after --grace); 0 means none")
	fs.DurationVar(&o.Grace, "grace", runner.DefaultGrace, "time between SIGTERM and SIGKILL")
	fs.IntVar(&o.Retries, "retries", 0, "run a failed or timed-out run up to `N` more times")
	fs.IntVar(&o.MaxFailures, "max-failures", 0, "start no new runs after `N` failures; 0 means keep going")
	fs.BoolVar(&o.FailFast, "fail-fast", false, "start no new runs after the first failure")
	fs.StringVar(&o.GPUIDs, "gpu-ids", "uuid", "how CUDA_VISIBLE_DEVICES names GPUs: uuid or index")
	fs.BoolVar(&o.Render, "render", false, "also set EGL_DEVICE_ID, MUJOCO_EGL_DEVICE_ID and PYGLET_HEADLESS_DEVICE")
	fs.BoolVar(&o.NoThreadCaps, "no-thread-caps", false, "do not set OMP_NUM_THREADS, MKL_NUM_THREADS, … to the run's CPU count")
	fs.StringArrayVar(&o.Env, "env", nil, "set `K=V` in every run (repeatable)")
	fs.StringVar(&o.Wrap, "wrap", "", "put `PREFIX` before every run, e.g. 'ch-run --set-env=config.env img --'")
	fs.BoolVar(&o.Live, "live", false, "also stream every run's output, each line prefixed with its run id")
	fs.BoolVarP(&o.Quiet, "quiet", "q", false, "report only failures and the summary")
	o.nodeOptions.AddFlags(fs)
}

// runnerOptions checks the flags and turns them into the runner's Options.
func (o *runOptions) runnerOptions() (runner.Options, error) {
	opts := runner.Options{
		OutputDir: o.Output, Stagger: o.Stagger, MinStartInterval: o.MinStartInterval,
		Timeout: o.Timeout, Grace: o.Grace, Retries: o.Retries, MaxFailures: o.MaxFailures,
		FailFast: o.FailFast, Render: o.Render, NoThreadCaps: o.NoThreadCaps, Env: o.Env,
	}
	for name, d := range map[string]time.Duration{"--stagger": o.Stagger, "--min-start-interval": o.MinStartInterval, "--timeout": o.Timeout, "--grace": o.Grace,
		"--stop-before": o.StopBefore, "--sample-interval": o.SampleInterval} {
		if d < 0 {
			return opts, fmt.Errorf("%s %v: must not be negative", name, d)
		}
	}
	if o.Retries < 0 || o.MaxFailures < 0 {
		return opts, errors.New("--retries and --max-failures must not be negative")
	}
	switch runner.GPUIDMode(o.GPUIDs) {
	case runner.GPUUUIDs, runner.GPUIndices:
		opts.GPUIDs = runner.GPUIDMode(o.GPUIDs)
	default:
		return opts, fmt.Errorf("--gpu-ids %q: want uuid or index", o.GPUIDs)
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return opts, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
	}
	if o.Wrap != "" {
		words, err := splitWords(o.Wrap)
		if err != nil {
			return opts, fmt.Errorf("--wrap: %w", err)
		}
		opts.Wrap = words
	}
	return opts, nil
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o runOptions
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.AddFlags(fs)
	if code, ok := parseFlags(fs, runUsage, args, stdout, stderr); !ok {
		return code
	}
	opts, err := o.runnerOptions()
	if err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	if o.Restart && o.RetryFailed {
		return usageErrorf(stderr, "run", "--restart reruns everything: --retry-failed goes with a resume")
	}

	// Everything the user gave is checked before anything starts: the
	// node, the plan, and every line of the task file.
	node, err := o.load(ctx)
	if err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	plan, err := pack.NewPlan(node.Topology(), o.Options)
	if err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	total, err := o.source.check(fs.Args())
	if err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	sched := resources.DetectScheduler(os.LookupEnv)
	drainAt, terminateAt, err := walltime(sched, o.StopBefore, opts.Grace)
	if err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	if o.Requeue && !canRequeue(sched) {
		return usageErrorf(stderr, "run", "--requeue: nodepack can requeue Slurm and Grid Engine jobs, not %s", describeKind(sched))
	}
	printWarnings(stderr, node.Warnings)
	printWarnings(stderr, plan.Warnings)
	printNotes(stderr, o.source.Notes)
	if o.source.DryRun {
		return o.source.printDryRun(fs.Args(), stdout, stderr)
	}
	shard := o.shard()
	if o.Output == "" {
		o.Output = defaultOutput(sched, os.LookupEnv, shard.Count > 1)
	}
	o.source.OutputDir = o.Output
	opts.OutputDir = o.Output
	opts.DrainAt, opts.TerminateAt = drainAt, terminateAt

	// The ledger: opened, read and given a header before anything runs, so
	// an unwritable directory, a full disk or a corrupt ledger stop here.
	ledgerPath := filepath.Join(o.Output, runner.LedgerFileName(shard.Index, shard.Count))
	if o.Restart {
		backup, err := runner.BackupLedger(ledgerPath)
		if err != nil {
			return usageErrorf(stderr, "run", "--restart: %v", err)
		}
		if backup != "" {
			fmt.Fprintf(stderr, "nodepack: --restart: the old ledger is now %s\n", backup)
		}
	}
	ledger, err := runner.OpenLedger(ledgerPath)
	if err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	defer ledger.Close()
	printWarnings(stderr, ledger.Warnings())
	header := runner.LedgerRecord{
		Version: nodepackVersion(),
		Command: append([]string{"nodepack", "run"}, args...),
		Shard:   &shard,
	}
	if total >= 0 {
		header.Total = &total
	}
	header.Node, _ = json.Marshal(node)
	header.Plan, _ = json.Marshal(plan)
	if err := ledger.WriteHeader(header); err != nil {
		return usageErrorf(stderr, "run", "%v", err)
	}
	printResuming(stderr, ledger.Past(), o.RetryFailed)

	ctx, stopSignals, kill := notifySignals(ctx)
	defer stopSignals()
	opts.Kill = kill

	// A ledger that cannot be written (a full disk) stops the starting of
	// runs: what runs would not be recorded.
	drain := make(chan struct{})
	opts.Drain = drain
	opts.PriorAttempts = ledger.PriorAttempts
	progress := newProgress(stderr, total, o.Quiet)
	ended := make(map[string]runner.Reason) // this session's final reasons, by run id
	opts.OnEvent = func(ev runner.Event) {
		if err := ledger.Record(ev); err != nil {
			select {
			case <-drain:
			default:
				close(drain)
			}
		}
		if ev.Kind == runner.Finished && !ev.Retry {
			ended[ev.Run.ID] = ev.Reason
		}
		progress.event(ev)
	}
	if o.Live {
		opts.Live = progress.liveWriter(stdout)
	}
	if sampler := newUsageSampler(o.SampleInterval); sampler != nil {
		defer sampler.Close()
		opts.Sampler = sampler
	}
	source, closeRuns := o.source.open(fs.Args())
	defer closeRuns()
	runs, resumed := ledger.Resume(source, o.RetryFailed)

	sum, err := runner.Execute(ctx, plan.Slots, runs, opts)
	progress.finish()
	printSummary(stderr, sum, o.Output)
	counts := resumed()
	printSkipped(stderr, counts)
	sig := interruptSignal(ctx)
	ledgerErr := ledger.Err()
	// A sweep that ran to its end left nothing for a requeue; only a stopped
	// one is worth reading the source again to count what is left.
	left := 0
	if sig != 0 || sum.Drained || sum.Stopped || err != nil || ledgerErr != nil {
		left = o.countLeft(fs.Args(), total, ledger.Past(), ended, o.RetryFailed)
	}
	note := "done"
	switch {
	case sig != 0:
		note = "stopped by " + unix.SignalName(sig)
	case ledgerErr != nil:
		note = "stopped: ledger could not be written"
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
	if ledgerErr != nil {
		fmt.Fprintf(stderr, "nodepack: stopped starting runs: %v; the ledger holds every record written before, and a rerun runs the rest again\n", ledgerErr)
	}
	// Only a warning (sbatch --signal, SGE -notify) or --stop-before asks for
	// a requeue: SIGTERM is scancel, qdel or a time limit already reached.
	warned := sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2
	requeue := o.Requeue && (warned || sum.Drained) && left != 0 && ledgerErr == nil
	if sig != 0 {
		fmt.Fprintf(stderr, "nodepack: stopped by %s: %d runs interrupted; rerun the same command to run them again\n", unix.SignalName(sig), sum.Interrupted)
		if requeue {
			return requeueJob(sched, stderr, 128+int(sig))
		}
		return 128 + int(sig)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodepack run: %v\n", err)
		if sum.Runs == 0 {
			return exitUsage
		}
		return exitFailed
	}
	if sum.Drained && ledgerErr == nil {
		fmt.Fprintf(stderr, "nodepack: stopped starting runs %v before the job's end (--stop-before): %s deferred to the requeue; rerun the same command to run them\n",
			o.StopBefore, countWord(left, "run"))
		if left != 0 {
			if requeue {
				return requeueJob(sched, stderr, exitDeferred)
			}
			return exitDeferred
		}
	}
	if ledgerErr != nil || sum.Failed > 0 || sum.Interrupted > 0 || counts.SkippedFailed > 0 {
		return exitFailed
	}
	return exitOK
}

// stopSignals are the signals that stop a sweep: scancel and walltime
// (SIGTERM), Ctrl-C, and the early warnings of sbatch --signal.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2}

// signalCause is the context cause recorded when a signal stops the sweep.
type signalCause struct{ sig syscall.Signal }

func (c signalCause) Error() string { return "received " + unix.SignalName(c.sig) }

// notifySignals returns a context cancelled by the first stop signal and a
// channel closed by a second SIGINT (kill at once).
func notifySignals(parent context.Context) (context.Context, func(), chan struct{}) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, stopSignals...)
	kill := make(chan struct{})
	done := make(chan struct{})
	go func() {
		interrupted := false
		for {
			select {
			case s := <-ch:
				sig := s.(syscall.Signal)
				if interrupted && sig == syscall.SIGINT {
					close(kill)
					return
				}
				if !interrupted {
					interrupted = true
					cancel(signalCause{sig})
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() { signal.Stop(ch); close(done); cancel(nil) }, kill
}

// interruptSignal returns the signal that stopped the sweep, or 0.
func interruptSignal(ctx context.Context) syscall.Signal {
	var c signalCause
	if errors.As(context.Cause(ctx), &c) {
		return c.sig
	}
	return 0
}

func printSummary(w io.Writer, s runner.Summary, output string) {
	fmt.Fprintf(w, "nodepack: %d runs: %d succeeded, %d failed", s.Runs, s.Succeeded, s.Failed)
	if s.TimedOut > 0 {
		fmt.Fprintf(w, " (%d timed out)", s.TimedOut)
	}
	if s.Interrupted > 0 {
		fmt.Fprintf(w, ", %d interrupted", s.Interrupted)
	}
	fmt.Fprintf(w, "; %d attempts in %v, slots %.0f%% busy\n", s.Attempts, s.Wall().Round(time.Millisecond), 100*s.Utilization())
	if s.Stopped {
		fmt.Fprintf(w, "nodepack: stopped starting runs after %d failures (--max-failures/--fail-fast)\n", s.Failed)
	}
	for _, ev := range s.Failures {
		fmt.Fprintf(w, "  failed: %s exit %d (%s)  %s\n", ev.Run.ID, ev.ExitCode, describeFailure(ev), logHint(ev))
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

func logHint(ev runner.Event) string {
	if ev.Stderr == "" {
		return ""
	}
	return ev.Stderr
}
