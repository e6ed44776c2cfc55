package execute

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// DefaultGrace is the grace period used when Options.Grace is zero: between
// SIGTERM and SIGKILL, well under Slurm's default KillWait of 30 s so that
// runs are gone before Slurm kills the job.
const DefaultGrace = 10 * time.Second

// NoGrace is the Options.Grace of no grace at all: SIGKILL right after
// SIGTERM.
const NoGrace time.Duration = -1

// GracePeriod is the grace o gives: Grace, DefaultGrace for zero, and 0
// for NoGrace.
func (o *Options) GracePeriod() time.Duration {
	switch {
	case o.Grace == 0:
		return DefaultGrace
	case o.Grace < 0:
		return 0
	}
	return o.Grace
}

// MemCheckInterval is how often EnforceMem checks the memory of a run
// that has no memory cgroup of its own.
const MemCheckInterval = 250 * time.Millisecond

// GPUMemCheckInterval is how often the GPU memory of a run that shares its
// GPU by gpu_mem is checked against its promise (see schedule.GPUMemLimit).
const GPUMemCheckInterval = time.Second

// GPUIDMode says how CUDA_VISIBLE_DEVICES names a run's GPUs.
type GPUIDMode string

const (
	// GPUUUIDs writes full GPU-… or MIG-… UUIDs. It is the default and the
	// only form that cannot point at the wrong device.
	GPUUUIDs GPUIDMode = "uuid"
	// GPUIndices writes NVML indices, for code that parses
	// CUDA_VISIBLE_DEVICES as integers. MIG devices are still written by
	// UUID, since an index cannot name them.
	GPUIndices GPUIDMode = "index"
)

// Options configures Execute. The zero value is usable: runs are not
// placed (no GPUs, no pinning) and up to one per CPU run at once, output
// is discarded, no timeout, no retries, failures do not stop other runs,
// and runs get a private TMPDIR.
//
// Options must not be modified while Execute is using them. Its fields
// come in three groups: the policy (what runs when and where), the
// process (how each run's process starts, runs and stops) and the hooks
// (what the caller is told and measures).
type Options struct {
	Policy
	Process
	Hooks
}

// Policy is what runs when and where: placement, the lanes, retries, early
// stopping, deadlines and what a resume starts from. Execute hands it to
// the scheduling policy (package schedule), which decides every start.
type Policy struct {
	// Topology is what runs are placed on: each run takes the GPUs, CPUs
	// and memory its request asks for (Run.Request, else Request) from it
	// when it starts, with its CPU affinity set and its GPUs in
	// CUDA_VISIBLE_DEVICES, and gives them back when its last attempt
	// ends. The zero Topology places nothing: runs get no GPUs and no
	// pinning, and may ask for nothing but the zero Request.
	Topology pack.Topology

	// Request is what a run asks for when its Run.Request is nil. A run
	// that can never fit the Topology is an error (see Start).
	Request pack.Request

	// Parallel is the most runs at once: lanes 0 to Parallel-1 (a run's
	// NODEPACK_SLOT). Zero means as many as their requests fit the
	// Topology, except that runs holding nothing of their own (the zero
	// Request: no GPU, one shared CPU, no memory) are at most one per CPU
	// at once; without a Topology, runtime.NumCPU().
	Parallel int

	// BackfillWait bounds how long runs may start ahead of an earlier run
	// that does not fit yet; after it, that run reserves what frees up
	// until it fits (see pack.Queue). Zero means schedule.DefaultBackfillWait;
	// negative means runs start strictly in order.
	BackfillWait time.Duration
	// Window, if positive, is the most runs taken from the source ahead of
	// their start (schedule.Config.Window); zero looks four a lane ahead,
	// at least 256. A source that claims its runs from a shared pool sets
	// it to the lanes, so that it claims them only as lanes free.
	Window int
	// Fenced, if not nil, is asked before each attempt of a run is set
	// up, again at the moment of its start, and when it ends otherwise
	// than Interrupted: true means the run is not this sweep's to run or
	// end now (a task of a shared pool lost its claim, or its lease
	// lapsed). Before the start, the run is left without an attempt or an
	// event; at its end, the attempt ends Interrupted, whatever its exit.
	// Execution.Fence stops the attempts already running.
	Fenced func(id string) bool
	// Guard, if not empty, names this sweep's runs to the supervisor
	// (proc.Spec.Guard), for a deadline by which it stops them if this
	// program cannot (proc.StopBy): a pool task's lease.
	Guard string

	// SettleTimeout bounds the readiness gate: a run that shares its GPU
	// by GPU memory keeps other runs off that GPU until its own memory
	// there has stopped growing (the Sampler says so) or SettleTimeout
	// has passed since it started. Zero means
	// schedule.DefaultSettleTimeout.
	// Without a Sampler, the gate is the timeout alone.
	SettleTimeout time.Duration

	// Prune, if set, stops runs early by the metric they report as they
	// train (see schedule.Prune): every PruneInterval (zero:
	// DefaultPruneInterval) each running attempt's metrics file, and its
	// stdout with Metrics' patterns, is read; each new value of
	// Prune.Metric is judged at the rungs it reaches, each judgement is a
	// Judged event, and a run judged out is stopped as a timeout is
	// (SIGTERM to its group, SIGKILL after Grace) and ends Pruned: neither
	// failed nor retried. The judgements earlier sessions of the sweep
	// recorded (Resume) are replayed first, so that a resumed sweep judges
	// as it did. Once runs report other metrics past the first rung, or end,
	// and none has reported Prune.Metric, OnNote is told: a misspelt name
	// must not leave pruning off unsaid. Without a run directory
	// (OutputDir) nothing is read.
	Prune         *schedule.Prune
	PruneInterval time.Duration

	// DensityMargin and DensityWindow are the density rule's, for runs
	// asking for gpus=auto (pack.Request.AutoShare, --runs-per-gpu auto):
	// their steps are read from their metrics (as for Prune, every
	// PruneInterval) and each shape's runs per GPU follow what they
	// measure (see package schedule). Zero: schedule's defaults.
	// Hooks.OnDensity is told each of the rule's decisions.
	DensityMargin float64
	DensityWindow time.Duration

	// Stagger fills the node gradually, so that its runs do not all load
	// data at the same moment: lane k (from 0) opens k×Stagger after
	// Execute starts, for as many lanes as runs of Request fit the
	// Topology at once (no more than Parallel; the lanes past them open
	// with the last). An open lane takes the next run as soon as it is
	// free: no run waits for the clock while an open lane is free. Each run
	// of the first wave goes to the GPUs the fewest of the wave went to
	// (see pack.Allocator.Spread), so the first runs land on distinct GPUs
	// even when each ends before the next starts.
	Stagger time.Duration

	// MinStartInterval is the least time between any two starts, across all
	// slots (retries included).
	MinStartInterval time.Duration

	// Retries is how many more attempts a run gets after a failure or a
	// timeout (not after an interruption). NODEPACK_ATTEMPT counts from 1.
	// It is the budget of every failure class that Retry does not name,
	// except host-oom and not-found: more of the same rarely helps those,
	// so they are retried only when Retry names them.
	Retries int

	// Retry sets the retry budget of failure classes: a run whose attempt
	// failed with class C gets another while its attempts that failed with
	// C in this sweep number at most Retry[C]. Interrupted attempts are
	// never retried. A cuda-oom retry of a run placed on a GPU asks for
	// more GPU memory (pack.MoreGPUMemory) and a host-oom retry of a run
	// that asked for Mem half as much memory again, when the node has
	// that; they are placed anew, ahead of the runs that wait. Other
	// retries keep their place.
	Retry map[failure.Class]int

	// RetryBackoff is the wait before a run's first retry; each later
	// retry of the run waits twice the one before, up to a minute. The run
	// keeps its place (its GPUs and CPUs) meanwhile. Zero retries at once.
	RetryBackoff time.Duration

	// MaxFailures stops the starting of new runs (and retries) once that many
	// runs have failed; running ones finish. Zero means no limit.
	MaxFailures int

	// DrainAt, if not zero, is when the sweep stops starting runs, checked at
	// the moment of every start; TerminateAt, if not zero, is when it stops
	// the running ones. They are the initial deadlines of
	// [Execution.SetDeadlines], which says what they do and moves them.
	DrainAt, TerminateAt time.Time

	// Resume is what the earlier sessions of a resumed sweep leave its
	// policy (a ledger's fold makes it: ledger.Log.PolicyState); the zero
	// State for a fresh sweep. A run's attempts are numbered after its
	// earlier ones (Resume.Runs, asked from the slots' goroutines,
	// concurrently), so NODEPACK_ATTEMPT keeps counting and its logs are
	// appended to rather than truncated; Retries still counts the
	// attempts of this Execute only. Each gpus=auto shape starts at the
	// density it was left at; the judgements are replayed (Prune); a run
	// that was paused waits for a promotion under the same pruning policy,
	// and runs from its checkpoint without it.
	Resume schedule.State
	// PrunePrior is the earlier sweeps' runs Prune's forecast rule learns
	// from (schedule.Pruner.UsePrior), given before Resume is replayed;
	// nil for none.
	PrunePrior []schedule.Prior
}

// Process is how each run's process starts, runs and stops: its
// directory and logs, its environment and command, its limits and the
// signals that stop it, the MPS daemon of runs that share a GPU, and how
// its failure is named.
type Process struct {
	// Metrics take per-step metrics from the runs' standard output (its
	// log: without OutputDir none is read), as each attempt ends; the
	// metrics file NODEPACK_METRICS names is read whatever they say (see
	// run.Event.Metrics).
	Metrics []metrics.Pattern

	// MPS says whether runs that share a GPU share it through an MPS
	// control daemon of the sweep's own (see MPSMode); MPSControl names
	// its program, MPSProgram in PATH when empty. With MPSCompute each
	// client is also held to its share of the GPU's compute
	// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE): its GPU share, or its gpu_mem's
	// part of the GPU's memory.
	MPS        MPSMode
	MPSControl string
	MPSCompute bool

	// CheckpointSignal, when not zero, is sent to a run's process group
	// before any stop of nodepack's (not Kill's): nodepack then waits up
	// to the grace for a new checkpoint (see CheckpointEnv) before
	// SIGTERM, so that a stop loses at most what the run did since.
	CheckpointSignal syscall.Signal

	// OutputDir receives <OutputDir>/runs/<run-id>/stdout.log and stderr.log.
	// Attempt 1 truncates them; a retry appends to them after a line
	// "--- nodepack: attempt N ---", so the paths in events never change.
	// Empty means no log files: output goes to Live only, or is discarded,
	// and NODEPACK_RUN_DIR is not set.
	OutputDir string

	// Live, if non-nil, also receives every line of every run's stdout and
	// stderr, prefixed with "[run-id] ". Each line is written with a single
	// Write call, so lines of concurrent runs never interleave; a line without
	// a final newline gets one, and lines longer than 64 KiB are split. Errors
	// from Live are ignored.
	Live io.Writer

	// Timeout limits each attempt; zero means no limit. On timeout the run's
	// process group gets SIGTERM, then SIGKILL after Grace.
	Timeout time.Duration

	// Grace is the time between SIGTERM and SIGKILL, for timeouts and for
	// cancellation; zero means DefaultGrace, and a negative Grace (NoGrace)
	// none: SIGKILL right after SIGTERM.
	Grace time.Duration

	// FailPatterns are matched against the tail of a failed attempt's
	// standard error (its log: without OutputDir no log is read) before
	// failure.Builtin, to name the attempt's class; see failure.Classify.
	FailPatterns []failure.Pattern

	// EnforceMem holds every run that asks for memory (Request.Mem) to
	// what it asked for: a run over it is killed and fails as host-oom,
	// and a line in its standard error's log says so. With MemCgroup, each
	// such attempt runs in a memory cgroup of its own there, limited to
	// its Mem (swap included) and joined before the run's first
	// instruction, and the kernel's OOM killer holds it to it. Without,
	// the Sampler checks the run's process tree every MemCheckInterval and
	// the runner kills it, so a fast allocation can go over for that long;
	// with neither, Start fails. Runs that ask for no memory are not
	// limited.
	EnforceMem bool

	// MemCgroup is the group of cgroup v1's memory hierarchy that this
	// process is in, when it may make groups in it (see
	// resources.RunMemoryCgroups); only EnforceMem uses it. The groups it
	// makes there are removed when their runs end.
	MemCgroup string

	// GPUIDs says how CUDA_VISIBLE_DEVICES names GPUs; empty means GPUUUIDs.
	GPUIDs GPUIDMode

	// Render sets EGL_DEVICE_ID, MUJOCO_EGL_DEVICE_ID and
	// PYGLET_HEADLESS_DEVICE to the NVML index of the run's first GPU.
	Render bool

	// NoThreadCaps leaves OMP_NUM_THREADS and the other thread-count
	// variables unset. By default each is set to the run's CPU count unless
	// nodepack's environment, Env or Run.Env already sets it.
	NoThreadCaps bool

	// Env holds KEY=VALUE entries for every run, applied after the
	// runner's variables (so they override them) and before Run.Env. In a
	// VALUE, {run_id}, {run_dir}, {index}, {rep} and {attempt} are
	// replaced by the attempt's own; other braces are kept as they are.
	Env []string

	// Wrap is put before every run's argv, e.g.
	// ["ch-run", "--set-env=config.env", "img", "--"].
	Wrap []string

	// TempDir is where private per-run TMPDIRs are made. Empty means
	// $SLURM_TMPDIR if set, else the system temporary directory ($TMPDIR or
	// /tmp), which batch systems usually point at node-local scratch.
	TempDir string
}

// Hooks are what the caller is told as the sweep runs, and what it
// measures for the runner: events, notes, GPU faults and the density
// rule's decisions; the sampler and the OOM count.
type Hooks struct {
	// OnDensity, if set, is told each of the density rule's decisions
	// (Policy.DensityMargin), from the scheduling goroutine; it must not
	// block.
	OnDensity func(schedule.DensityChange)

	// OnNote, if set, is told what is worth saying while the sweep runs,
	// each thing once: a prune metric no run reports, GPU memory the
	// readiness gate cannot read. It is called from the runs' goroutines.
	OnNote func(note string)

	// OOMKills, if set, returns the count of kernel OOM kills in the
	// memory cgroup of this process (and its runs), and whether it could
	// be read. It is read as each attempt starts and ends: an attempt that
	// died of SIGKILL (or exited 137, as a shell does when its child did)
	// while the count rose is host-oom. Two runs that die so at the same
	// time are both host-oom: the count does not say whose process died.
	OOMKills func() (uint64, bool)

	// GPUFaults, if set, delivers the faults the GPUs report (see
	// resources.WatchGPUFaults). A GPU that reports one is taken out of use
	// for the rest of the sweep (with its MIG devices): no run starts on it
	// again; a run on it that fails is gpu-error and is retried on another
	// GPU, at least once even without a retry budget; waiting runs that the
	// GPUs left can never serve end the sweep with an error; with no GPU
	// left, no run starts. OnGPUFault, if set, is called once per GPU taken
	// out, never concurrently with OnEvent; none says no GPU is left.
	GPUFaults  <-chan usage.GPUFault
	OnGPUFault func(f usage.GPUFault, none bool)

	// OnEvent, if non-nil, is called when an attempt starts and when it
	// finishes. Calls are never concurrent; they come from the slots'
	// goroutines, so a slow OnEvent delays the runs.
	OnEvent func(run.Event)

	// Sampler, if non-nil, measures every attempt while it runs: its
	// process tree's memory and its GPUs (resources.UsageSampler is one;
	// the runner itself reads no hardware), and says when a run's GPU
	// memory has settled (the readiness gate, gpu_mem=auto). Without one,
	// Event.Usage holds what the kernel reports when the run's process is
	// reaped, and gpu_mem=auto cannot be used.
	Sampler usage.Sampler
}

// Summary is what Execute reports at the end.
type Summary struct {
	Runs        int // runs started (each counted once, whatever its attempts), and the paused runs an earlier session left that stay paused
	Attempts    int
	Succeeded   int
	Failed      int // runs whose last attempt failed or timed out
	TimedOut    int // of Failed, those whose last attempt timed out
	Interrupted int // runs stopped by cancellation, Kill or the terminate deadline, or ended by a stop signal from outside
	// OutsideStops counts the attempts, of Interrupted, that ended by a
	// stop signal the runner did not send (see StopSignal).
	OutsideStops int
	Pruned       int // runs the pruning policy stopped early (Options.Prune)
	// Paused counts the runs paused at the end: judged out, they keep
	// checkpoints, and no promotion resumed them (see Options.Prune);
	// Promoted counts the promotions, each a new attempt of a paused run.
	Paused, Promoted int
	// Forecasts says how the forecast rule's intervals held on the runs
	// that finished (schedule.Pruner.Coverage); zero without that rule.
	Forecasts schedule.Coverage
	// Prior says what the prior did (Options.PrunePrior): whether the
	// forecast learnt from it at the end, why it was dropped, how many of
	// this sweep's runs checked it, and how many runs it helped stop; the
	// zero PriorState without one.
	Prior schedule.PriorState
	// Classes counts the runs of Failed by the class of their last
	// attempt; nil when none failed.
	Classes map[failure.Class]int
	// GPUsOut lists the GPUs taken out of use after a fault, in order;
	// NoGPUsLeft says that was every GPU, so no run started after.
	GPUsOut    []usage.GPUFault
	NoGPUsLeft bool
	// Failures holds the Finished event of the last attempt of each failed
	// run, in the order they ended; at most MaxReportedFailures of them.
	Failures []run.Event
	// Stopped reports that MaxFailures stopped new runs.
	Stopped bool
	// Drained reports that Drain or the drain deadline stopped new runs.
	Drained bool

	Start, End time.Time
	// LaneBusy is, per lane used, the summed time its runs' processes were
	// alive.
	LaneBusy []time.Duration
}

// maxReportedFailures caps Summary.Failures; Summary.Failed has the count.
const maxReportedFailures = 1000

// Wall is the time Execute took.
func (s Summary) Wall() time.Duration { return s.End.Sub(s.Start) }

// Utilization is the fraction of the time of the lanes used that was spent
// running processes, between 0 and 1; 0 when nothing ran.
func (s Summary) Utilization() float64 {
	wall := s.Wall()
	if wall <= 0 || len(s.LaneBusy) == 0 {
		return 0
	}
	var busy time.Duration
	for _, b := range s.LaneBusy {
		busy += b
	}
	return float64(busy) / (float64(wall) * float64(len(s.LaneBusy)))
}

// check refuses options that cannot run, before anything starts, and
// returns the Parallel the scheduler gets: with a Topology, Parallel as
// is (0: as many as fit); without one, 0 is one per CPU.
func (o *Options) check() (parallel int, err error) {
	switch o.GPUIDs {
	case "", GPUUUIDs, GPUIndices:
	default:
		return 0, fmt.Errorf("gpu ids %q: want %q or %q", o.GPUIDs, GPUUUIDs, GPUIndices)
	}
	switch {
	case o.Parallel < 0:
		return 0, fmt.Errorf("parallel %d: must not be negative", o.Parallel)
	case o.hasTopology():
		parallel = o.Parallel // 0: as many as fit: the runs' requests bound them
	case o.Parallel == 0:
		parallel = runtime.NumCPU()
	default:
		parallel = o.Parallel
	}
	if o.EnforceMem && o.MemCgroup == "" && o.Sampler == nil {
		return 0, errors.New("enforce mem needs a memory cgroup to make groups in or a Sampler to check the runs' memory")
	}
	for c, n := range o.Retry {
		if !c.Valid() || c == failure.Interrupted || n < 0 {
			return 0, fmt.Errorf("retry %s=%d: want a failure class other than interrupted and a count of at least 0", c, n)
		}
	}
	switch o.MPS {
	case MPSAuto, MPSOff:
	case MPSOn:
		if _, err := mpsPath(o); err != nil {
			return 0, fmt.Errorf("mps on: %w", err)
		}
	default:
		return 0, fmt.Errorf("mps %q: want auto, on or off (empty)", o.MPS)
	}
	return parallel, nil
}
