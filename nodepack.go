// Package nodepack runs a resumable sweep on this node with everything the
// nodepack command wires, in one call: [Run] (or [Prepare], then the
// returned Sweep's Start and its session's Wait).
//
// It is the one package that joins the two halves below it: package
// resources, which reads the hardware (the allowed CPUs, the GPUs through
// NVML, memory, cgroups), and package runner, which runs the sweep and
// keeps its ledger but links no hardware library. Wiring a node means:
//
//   - the node is detected (or given), and runs are placed on its
//     Topology;
//   - every run is measured while it runs (a sampler of its process tree
//     and its GPUs): usage in the ledger, gpu_mem=auto, the readiness gate
//     of runs sharing a GPU by memory, EnforceMem without a cgroup;
//   - the kernel's OOM kills are counted, so a run killed by them fails as
//     host-oom;
//   - with EnforceMem, runs asking for memory run in memory cgroups of
//     their own where this process may make them;
//   - the GPUs' faults (Xid, ECC) are watched: a GPU that reports one is
//     taken out of use, and its run is retried elsewhere;
//   - the batch job is detected, for the output directory's name, the
//     shard of an array job, the job's end and requeues.
//
// An embedding program calls proc.MaybeGuard first thing in main, as
// the nodepack command does, so that no run outlives it even after a kill
// -9.
package nodepack

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner"
)

// DefaultSampleInterval is how often runs are measured when
// Options.SampleInterval is zero.
const DefaultSampleInterval = 10 * time.Second

// Options are runner.Options and how to wire the node. The zero Options
// (with a Source) run the sweep on this node, detected, measuring every
// DefaultSampleInterval.
type Options struct {
	runner.Options
	// Node is the node to place runs on; nil detects this one. A
	// Topology already set in Execute is kept (a caller that narrowed the
	// node, or planned it, sets it).
	Node *resources.Node
	// Pack, if not nil, lays the runs out on the node as the nodepack
	// command does (pack.NewSweepPlan): every run asks for the plan's
	// request unless it says otherwise (Execute.Request and
	// Source.Request), at most Pack.Parallel run at once when it is given,
	// and the ledger's header records the plan of the sweep's first wave.
	// Its errors are *pack.FitError's where the settings do not fit.
	Pack *pack.Options
	// With Pack.AutoRunsPerGPU and no GPU memory asked, where runs are
	// measured and the GPUs' memory is known, each shape's memory is
	// measured too (AutoGPUMem): no more runs share a GPU than it holds.
	//
	// SampleInterval is how often each run's process tree and GPUs are
	// measured; zero means DefaultSampleInterval, negative not at all
	// (only the kernel's totals: then gpu_mem=auto cannot be asked for, and
	// EnforceMem needs a memory cgroup).
	SampleInterval time.Duration
}

// MemLimitError is Prepare's error when EnforceMem cannot hold runs to
// their memory: no memory cgroup can be made here (Why), and runs are not
// measured either.
type MemLimitError struct{ Why error }

// Error says why memory cannot be enforced, for a person.
func (e *MemLimitError) Error() string {
	return fmt.Sprintf("nodepack: enforce mem: no memory cgroup can be made here (%v), and the runs are not measured to check it instead", e.Why)
}

// Unwrap returns Why.
func (e *MemLimitError) Unwrap() error { return e.Why }

// Sweep is a sweep prepared on a wired node: a runner.Sweep, and what the
// wiring holds (the sampler, the fault watcher) until Close.
type Sweep struct {
	*runner.Sweep
	// Node is the node the sweep runs on.
	Node resources.Node
	// Plan is the layout of Options.Pack on Node, with its warnings; the
	// zero Plan without Pack.
	Plan pack.Plan
	// MemCgroup is where EnforceMem makes the runs' memory cgroups; empty
	// when the sampler checks them instead (NoMemCgroup says why), or
	// without EnforceMem.
	MemCgroup   string
	NoMemCgroup error

	sampler    *resources.UsageSampler
	stopFaults context.CancelFunc
}

// Prepare wires the node into opts (see the package documentation) and
// prepares the sweep as runner.Prepare does: every check before anything
// starts. Close the Sweep when done.
func Prepare(ctx context.Context, opts Options) (*Sweep, error) {
	s := &Sweep{}
	if opts.Node != nil {
		s.Node = *opts.Node
	} else {
		node, err := resources.Detect(ctx, resources.Options{})
		if err != nil {
			return nil, err
		}
		s.Node = node
	}
	x := &opts.Execute
	if len(x.Topology.CPUs) == 0 && len(x.Topology.GPUs) == 0 {
		x.Topology = s.Node.Topology()
	}
	if opts.Pack != nil {
		// What each run asks for, and the checks and warnings of
		// Parallel, come from a plan of one slot; the first wave is laid
		// out once the runs are counted, no larger than they are.
		one := *opts.Pack
		one.Runs = 1
		if one.AutoRunsPerGPU && one.GPUMem == 0 && !one.AutoGPUMem && opts.SampleInterval >= 0 && len(x.Topology.GPUs) > 0 &&
			!slices.ContainsFunc(x.Topology.GPUs, func(g pack.GPU) bool { return g.MemoryBytes == 0 }) {
			// Runs per GPU by measurement, never more than their measured
			// memory holds.
			one.AutoGPUMem = true
		}
		plan, err := pack.NewSweepPlan(x.Topology, one)
		if err != nil {
			return nil, err
		}
		x.Request, opts.Source.Request, x.Parallel = plan.Request, plan.Request, opts.Pack.Parallel
	}
	if opts.Source.GPUMemory == 0 {
		opts.Source.GPUMemory = x.Topology.GPUMemory()
	}
	if opts.Job == (batch.Job{}) {
		opts.Job = batch.Detect(os.LookupEnv)
	}
	if x.Sampler == nil && opts.SampleInterval >= 0 {
		interval := opts.SampleInterval
		if interval == 0 {
			interval = DefaultSampleInterval
		}
		s.sampler = resources.NewUsageSampler(interval)
		x.Sampler = s.sampler
	}
	if x.OOMKills == nil {
		x.OOMKills = resources.OOMKills() // nil where no cgroup counts them
	}
	if x.EnforceMem && x.MemCgroup == "" {
		dir, whyNot := resources.RunMemoryCgroups()
		if dir == "" && x.Sampler == nil {
			s.Close()
			return nil, &MemLimitError{Why: whyNot}
		}
		x.MemCgroup, s.NoMemCgroup = dir, whyNot
	}
	s.MemCgroup = x.MemCgroup
	if x.GPUFaults == nil && len(x.Topology.GPUs) > 0 {
		watch, stop := context.WithCancel(ctx)
		s.stopFaults = stop
		x.GPUFaults = resources.WatchGPUFaults(watch, physicalGPUs(x.Topology)) // nil without NVML events
	}
	sw, err := runner.Prepare(opts.Options)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Sweep = sw
	if opts.Pack != nil {
		all := *opts.Pack
		all.Runs, _ = sw.Total()
		if s.Plan, err = pack.NewSweepPlan(x.Topology, all); err != nil {
			s.Close()
			return nil, err
		}
		sw.SetPlan(s.Plan)
	}
	return s, nil
}

// Close releases the sweep and what the wiring holds.
func (s *Sweep) Close() {
	if s.Sweep != nil {
		s.Sweep.Close()
	}
	if s.sampler != nil {
		s.sampler.Close()
	}
	if s.stopFaults != nil {
		s.stopFaults()
	}
}

// Outcome is how a sweep ended (runner.Outcome), with what nodepack had
// to say before it started, which the nodepack command prints first.
type Outcome struct {
	runner.Outcome
	// Warnings are what detecting the node found amiss
	// (resources.Node.Warnings): a CUDA_VISIBLE_DEVICES entry that names
	// no GPU, say.
	Warnings []string
	// Notes are the sweep's remarks (runner.Sweep.Notes): which shard
	// this is, runs done before, a dropped --multirun. Notes made while
	// it runs go to Options.OnNote.
	Notes []string
}

// Run prepares the sweep on the wired node, runs it to its end and
// returns how it ended, as runner.Session.Wait does; an error before
// anything started (bad input, another sweep in the output directory) is
// returned with the zero Outcome.
func Run(ctx context.Context, opts Options) (Outcome, error) {
	sw, err := Prepare(ctx, opts)
	if err != nil {
		return Outcome{}, err
	}
	defer sw.Close()
	o := Outcome{Warnings: sw.Node.Warnings, Notes: sw.Notes()}
	session, err := sw.Start(ctx)
	if err != nil {
		return Outcome{}, err
	}
	o.Outcome, err = session.Wait()
	return o, err
}

// physicalGPUs returns the UUIDs of the physical GPUs of topo: a MIG
// device's parent stands for it, since faults are the physical GPU's.
func physicalGPUs(topo pack.Topology) []string {
	var uuids []string
	for _, g := range topo.GPUs {
		u := g.UUID
		if g.MIG && g.Parent != "" {
			u = g.Parent
		}
		if !slices.Contains(uuids, u) {
			uuids = append(uuids, u)
		}
	}
	return uuids
}
