package pack

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Options says what each run of a sweep asks for by default, and how
// many run at once: the flags of the command line, laid out by [NewPlan].
// Each field stands for the flag named in its comment; zero means its
// default, so the zero Options asks for one run per GPU (or MIG device),
// or one run per physical core on a node without GPUs, with the CPUs
// split evenly.
type Options struct {
	// Parallel is the number of runs at once (--parallel). Default: the GPUs
	// (or MIG devices) divided by GPUsPerRun, times the runs that share one;
	// on a node without GPUs, the number of physical cores; in either case
	// no more than CPUsPerRun allows, when it is given.
	Parallel int

	// GPUsPerRun is the number of GPUs each run has to itself
	// (--gpus-per-run N). Default: 1 on a node with GPUs, unless the runs
	// share GPUs (GPUShare, RunsPerGPU, GPUMem). Values above 1 exclude
	// sharing.
	GPUsPerRun int

	// GPUShare is the share of one GPU each run gets, in thousandths
	// (--gpus-per-run 0.25 is 250); the runs share GPUs.
	GPUShare int

	// RunsPerGPU is the number of runs that share one GPU (--runs-per-gpu
	// K), a share of 1/K each. Default: 1.
	RunsPerGPU int

	// GPUMem is the GPU memory each run needs (--gpu-mem-per-run): the
	// runs share GPUs as long as their memory fits (see [Request]).
	// AutoGPUMem measures it instead (--gpu-mem-per-run auto).
	GPUMem     uint64
	AutoGPUMem bool

	// CPUsPerRun is the number of CPUs per run (--cpus-per-run). Default: the
	// allowed CPUs split evenly among the runs, in whole cores when there
	// are at least as many cores as runs. If there are fewer CPUs than runs,
	// the default lets runs share CPUs (see [Plan]); an explicit value that
	// does not fit is an error. With AutoGPUMem, where the number of runs
	// per GPU is not known before they run, the default is a quarter of
	// the CPUs per GPU.
	CPUsPerRun int

	// Mem is the host memory each run needs (--mem-per-run); zero means
	// runs start whatever their memory.
	Mem uint64

	// Runs, unlike the fields above no flag, is how many runs the sweep
	// has, when known: the first wave is no more than that, so the plan
	// lays out no more slots (--parallel 1000000 for 4 runs lays out 4),
	// while its Request, checks and warnings are those of Parallel runs.
	// Zero means not known.
	Runs int
}

// Plan is a layout of a node for runs of one Request: the first wave of
// Parallel runs, each in a slot with its Assignment, as an [Allocator]
// serving the runs in order places them. The zero Plan has no slots.
type Plan struct {
	// Slots are in allocation order: Slots[i].Index == i.
	Slots []Slot

	// Parallel is how many runs run at once: len(Slots), unless
	// Options.Runs cut the first wave short.
	Parallel int

	// IdleGPUs are the GPUs no slot uses, in topology order (by Index).
	IdleGPUs []GPU

	// IdleCPUs are the IDs of the CPUs no slot uses, ascending.
	IdleCPUs []int

	// Warnings describe compromises the plan made instead of failing, such
	// as runs sharing CPUs. They are full sentences for a person.
	Warnings []string

	// Request is what each run asks for: the Options with their defaults
	// filled in. When runs share CPUs, Request.CPUs is 0.
	Request Request

	// RunsPerGPU is the most slots that share one GPU; 0 without GPUs.
	RunsPerGPU int
}

// FitError reports Options that do not fit a topology, or are invalid. Its
// message is written for the person who typed the flags: it names the flags
// and, where there are any, the nearest choices that fit, as in
//
//	--parallel 12 does not fit 8 GPUs with --gpus-per-run 1: use --parallel 8, or --runs-per-gpu 2 with --parallel 16
type FitError struct {
	Problem     string   // what does not fit, naming the flags
	Suggestions []string // nearest valid flag choices; may be empty
}

// Error returns the problem, then the suggestions, if any.
func (e *FitError) Error() string {
	if len(e.Suggestions) == 0 {
		return e.Problem
	}
	return e.Problem + ": use " + strings.Join(e.Suggestions, ", or ")
}

// NewPlan lays out o.Parallel runs of one request on t: it resolves the
// defaults of o and makes that many requests of a fresh [Allocator], so
// slot i gets what the i-th Allocate would. The result depends only on t
// and o.
//
// When there are more runs than CPUs and o.CPUsPerRun is 0, each run gets
// one CPU that it shares with other runs (Request.CPUs is 0): the least
// loaded one, so that the numbers of runs on any two CPUs differ by at
// most one, near its GPU where that keeps the balance. Those slots have
// SharedCPUs set and the plan carries a warning.
//
// NewPlan returns a *[FitError] when o is invalid or does not fit t, and
// another error when t is invalid or has no CPUs.
func NewPlan(t Topology, o Options) (Plan, error) {
	a := NewAllocator(t)
	if a.err != nil {
		return Plan{}, fmt.Errorf("plan: %w", a.err)
	}
	if len(a.cpus) == 0 {
		return Plan{}, errors.New("plan: topology has no cpus")
	}
	parallel, req, err := a.resolve(o)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Request: req, Parallel: parallel}
	if req.AutoGPUMem {
		// The first run on each GPU is measured alone.
		req.AutoGPUMem, req.GPUShare = false, GPUWhole
	}
	perGPU := map[string]int{}
	wave := parallel
	if o.Runs > 0 {
		wave = min(wave, o.Runs)
	}
	for i := range wave {
		as, err := a.allocate(req)
		if err != nil {
			// resolve has checked that every slot fits the empty node.
			return Plan{}, fmt.Errorf("plan: slot %d: %w", i, err)
		}
		p.Slots = append(p.Slots, Slot{Index: i, Assignment: as})
		for _, g := range as.GPUs {
			perGPU[g.UUID]++
			p.RunsPerGPU = max(p.RunsPerGPU, perGPU[g.UUID])
		}
	}
	if req.CPUs == 0 {
		most := 0
		for i := range p.Slots {
			s := &p.Slots[i]
			load := a.load[a.cpuIndex[s.CPUs[0]]]
			s.SharedCPUs = load > 1
			most = max(most, load)
		}
		if wave < parallel {
			// The slots not laid out share CPUs as evenly: no two
			// differ by more than one run.
			most = (parallel + len(a.cpus) - 1) / len(a.cpus)
		}
		p.Warnings = append(p.Warnings, sharingWarning(o, parallel, len(a.cpus), len(a.units), most))
	}
	p.IdleGPUs, _ = a.Free()
	if o.Parallel == 0 && o.CPUsPerRun > 0 && len(p.IdleGPUs) > 0 && len(a.units) > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("--cpus-per-run %d leaves room for %s at once on %s: %s idle",
			o.CPUsPerRun, plural(parallel, "run"), plural(len(a.cpus), "CPU"), plural(len(p.IdleGPUs), "GPU")))
	}
	used := make(map[int]bool, len(a.cpus))
	for _, s := range p.Slots {
		for _, id := range s.CPUs {
			used[id] = true
		}
	}
	for _, c := range a.cpus {
		if !used[c.ID] {
			p.IdleCPUs = append(p.IdleCPUs, c.ID)
		}
	}
	return p, nil
}

// sharingWarning says that parallel runs at once share ncpus CPUs, up to
// most on one, and what made them that many: the --parallel the user gave,
// the runs per GPU the user asked for, or the node itself (more GPUs, one
// run each, than CPUs). It names only flags the user gave.
func sharingWarning(o Options, parallel, ncpus, gpus, most int) string {
	shared := fmt.Sprintf("share %s, up to %d on one CPU", plural(ncpus, "CPU"), most)
	switch {
	case o.Parallel > 0:
		return fmt.Sprintf("--parallel %d: %d runs at once %s; lower --parallel to give each run CPUs of its own", o.Parallel, parallel, shared)
	case o.RunsPerGPU > 1:
		return fmt.Sprintf("--runs-per-gpu %d on %s: %d runs at once %s; --cpus-per-run 1 gives each run a CPU of its own, with fewer at once", o.RunsPerGPU, plural(gpus, "GPU"), parallel, shared)
	case o.GPUShare > 0:
		return fmt.Sprintf("--gpus-per-run %s on %s: %d runs at once %s; --cpus-per-run 1 gives each run a CPU of its own, with fewer at once", formatShare(o.GPUShare), plural(gpus, "GPU"), parallel, shared)
	case o.GPUMem > 0:
		return fmt.Sprintf("--gpu-mem-per-run %s on %s: %d runs at once %s; --cpus-per-run 1 gives each run a CPU of its own, with fewer at once", FormatSize(o.GPUMem), plural(gpus, "GPU"), parallel, shared)
	}
	return fmt.Sprintf("this node has more GPUs than CPUs: its %d runs at once (one per GPU) %s", parallel, shared)
}

// resolve fills in the defaults of o and checks that o fits the node.
func (a *Allocator) resolve(o Options) (parallel int, r Request, err error) {
	for _, f := range []struct {
		flag  string
		value int
	}{
		{"--parallel", o.Parallel},
		{"--gpus-per-run", o.GPUsPerRun},
		{"--runs-per-gpu", o.RunsPerGPU},
		{"--cpus-per-run", o.CPUsPerRun},
	} {
		if f.value < 0 {
			return 0, r, &FitError{Problem: fmt.Sprintf("%s %d: must not be negative", f.flag, f.value)}
		}
	}
	gpus, k := o.GPUsPerRun, max(o.RunsPerGPU, 1)
	switch {
	case gpus > 1 && k > 1:
		return 0, r, &FitError{
			Problem:     fmt.Sprintf("--gpus-per-run %d and --runs-per-gpu %d exclude each other", gpus, k),
			Suggestions: []string{flag("--gpus-per-run", gpus), flag("--runs-per-gpu", k)},
		}
	case o.GPUShare > 0 && (gpus > 0 || k > 1):
		return 0, r, &FitError{Problem: fmt.Sprintf("--gpus-per-run %s and --runs-per-gpu %d say the same thing twice: give one", formatShare(o.GPUShare), k)}
	case o.GPUShare < 0 || o.GPUShare >= GPUWhole:
		return 0, r, &FitError{Problem: fmt.Sprintf("--gpus-per-run %s: a share is of one GPU, between 0 and 1", formatShare(o.GPUShare))}
	case k > GPUWhole:
		return 0, r, &FitError{Problem: fmt.Sprintf("--runs-per-gpu %d: at most %d runs share one GPU", k, GPUWhole)}
	case o.AutoGPUMem && o.GPUMem > 0:
		return 0, r, &FitError{Problem: "--gpu-mem-per-run is a size or auto, not both"}
	case (o.AutoGPUMem || o.GPUMem > 0) && gpus > 1:
		return 0, r, &FitError{Problem: fmt.Sprintf("--gpu-mem-per-run shares GPUs by memory: it excludes --gpus-per-run %d", gpus)}
	}
	r = Request{GPUs: gpus, GPUShare: o.GPUShare, GPUMem: o.GPUMem, AutoGPUMem: o.AutoGPUMem, Mem: o.Mem}
	if k > 1 {
		r.GPUShare = GPUWhole / k
	}
	sharing := r.GPUShare > 0 || r.GPUMem > 0 || r.AutoGPUMem
	if sharing {
		r.GPUs = 0
	}

	parallel = o.Parallel
	perGPU := 1 // runs on one GPU in the first wave
	if len(a.units) == 0 {
		switch {
		case gpus > 0:
			return 0, r, &FitError{Problem: flag("--gpus-per-run", gpus) + " does not fit a node without GPUs"}
		case k > 1:
			return 0, r, &FitError{Problem: flag("--runs-per-gpu", k) + " does not fit a node without GPUs"}
		case o.GPUShare > 0:
			return 0, r, &FitError{Problem: "--gpus-per-run " + formatShare(o.GPUShare) + " does not fit a node without GPUs"}
		case r.GPUMem > 0 || r.AutoGPUMem:
			return 0, r, &FitError{Problem: "--gpu-mem-per-run does not fit a node without GPUs"}
		}
		if parallel == 0 {
			parallel = len(a.cores)
		}
	} else {
		if !sharing {
			r.GPUs = max(gpus, 1)
		}
		units := len(a.units)
		if r.GPUs > 1 {
			units = a.nwhole // a MIG device is never combined with others
		}
		if r.GPUs > units {
			return 0, r, a.tooManyGPUs(r.GPUs, o.Parallel)
		}
		var capacity int
		switch {
		case r.GPUMem > 0:
			if err := a.checkFits(r); err != nil {
				return 0, r, &FitError{Problem: "--gpu-mem-per-run " + FormatSize(r.GPUMem) + ": " + strings.TrimSuffix(err.Error(), ": "+ErrNeverFits.Error())}
			}
			for _, u := range a.units {
				n := int(u.usable / r.GPUMem)
				if r.GPUShare > 0 {
					n = min(n, GPUWhole/r.GPUShare)
				}
				capacity += n
				perGPU = max(perGPU, n)
			}
		case r.AutoGPUMem:
			capacity = units
		case r.GPUShare > 0:
			perGPU = GPUWhole / r.GPUShare
			if k > 1 {
				perGPU = k
			}
			capacity = units * perGPU
		case r.GPUs > 1:
			capacity = a.closeGPUsCapacity(r)
		default:
			capacity = units
		}
		if parallel == 0 {
			parallel = capacity
		}
		if parallel > capacity {
			return 0, r, a.tooParallel(parallel, r, k, capacity)
		}
	}
	if r.Mem > 0 {
		if err := a.checkFits(Request{Mem: r.Mem}); err != nil {
			return 0, r, &FitError{Problem: "--mem-per-run " + FormatSize(r.Mem) + ": " + strings.TrimSuffix(err.Error(), ": "+ErrNeverFits.Error())}
		}
		if most := int(a.memory / r.Mem); parallel > most {
			if o.Parallel > 0 {
				return 0, r, &FitError{
					Problem:     fmt.Sprintf("--mem-per-run %s with --parallel %d needs %s, the node has %s", FormatSize(r.Mem), parallel, FormatSize(r.Mem*uint64(parallel)), FormatSize(a.memory)),
					Suggestions: []string{flag("--parallel", most)},
				}
			}
			parallel = most
		}
	}

	ncpus := len(a.cpus)
	cpus := o.CPUsPerRun
	if o.Parallel == 0 && cpus > 0 && cpus <= ncpus && parallel*cpus > ncpus {
		// No --parallel: as many runs as the CPUs per run allow.
		parallel = ncpus / cpus
	}
	switch {
	case cpus > ncpus:
		fe := &FitError{Problem: fmt.Sprintf("--cpus-per-run %d does not fit %s", cpus, plural(ncpus, "CPU"))}
		if parallel > 1 {
			fe.Suggestions = append(fe.Suggestions, flag("--cpus-per-run", ncpus)+" with --parallel 1")
		} else {
			fe.Suggestions = append(fe.Suggestions, flag("--cpus-per-run", ncpus))
		}
		return 0, r, fe
	case cpus > 0 && parallel*cpus > ncpus:
		fe := &FitError{Problem: fmt.Sprintf("--cpus-per-run %d with --parallel %d needs %d CPUs, the node has %d",
			cpus, parallel, parallel*cpus, ncpus)}
		if c := ncpus / parallel; c >= 1 {
			fe.Suggestions = append(fe.Suggestions, flag("--cpus-per-run", c))
		}
		fe.Suggestions = append(fe.Suggestions, flag("--parallel", ncpus/cpus))
		return 0, r, fe
	case cpus == 0 && r.AutoGPUMem:
		cpus = max(a.defaultCPUs(len(a.units))/4, 1)
	case cpus == 0 && parallel <= ncpus:
		cpus = a.defaultCPUs(parallel)
	}
	r.CPUs = cpus // 0 when more runs than CPUs: they share CPUs
	return parallel, r, nil
}

// tooManyGPUs explains a --gpus-per-run larger than the node.
func (a *Allocator) tooManyGPUs(gpus, parallel int) *FitError {
	if a.nwhole == 0 {
		return &FitError{
			Problem:     fmt.Sprintf("--gpus-per-run %d does not fit %s (a run gets at most one)", gpus, a.unitsPhrase(1)),
			Suggestions: []string{"--gpus-per-run 1"},
		}
	}
	s := flag("--gpus-per-run", a.nwhole)
	if parallel > 1 {
		s += " with --parallel 1"
	}
	return &FitError{
		Problem:     fmt.Sprintf("--gpus-per-run %d does not fit %s", gpus, a.unitsPhrase(gpus)),
		Suggestions: []string{s},
	}
}

// tooParallel explains a --parallel above capacity, suggesting the largest
// --parallel that fits and the nearest change of GPUs per run or runs per
// GPU that fits the asked --parallel.
func (a *Allocator) tooParallel(parallel int, r Request, k, capacity int) *FitError {
	var with string
	switch {
	case r.GPUMem > 0:
		with = "--gpu-mem-per-run " + FormatSize(r.GPUMem)
	case r.AutoGPUMem:
		with = "--gpu-mem-per-run auto (one run per GPU until the first are measured)"
	case r.GPUShare > 0 && k > 1:
		with = flag("--runs-per-gpu", k)
	case r.GPUShare > 0:
		with = "--gpus-per-run " + formatShare(r.GPUShare)
	default:
		with = flag("--gpus-per-run", r.GPUs)
	}
	gpus := max(r.GPUs, 1)
	fe := &FitError{
		Problem:     fmt.Sprintf("--parallel %d does not fit %s with %s", parallel, a.unitsPhrase(gpus), with),
		Suggestions: []string{flag("--parallel", capacity)},
	}
	if r.GPUMem > 0 || r.AutoGPUMem {
		return fe
	}
	if g := a.nwhole / parallel; gpus > 1 && g >= 1 {
		fe.Suggestions = append(fe.Suggestions, fmt.Sprintf("%s with %s", flag("--gpus-per-run", g), flag("--parallel", parallel)))
		return fe
	}
	units := len(a.units)
	n := (parallel + units - 1) / units // runs per GPU so that parallel fits
	fe.Suggestions = append(fe.Suggestions, fmt.Sprintf("%s with %s", flag("--runs-per-gpu", n), flag("--parallel", n*units)))
	return fe
}

// unitsPhrase names what runs of gpus GPUs each are served from: "8 GPUs",
// "14 MIG devices", "2 whole GPUs".
func (a *Allocator) unitsPhrase(gpus int) string {
	mig := len(a.units) - a.nwhole
	switch {
	case mig == 0:
		return plural(a.nwhole, "GPU")
	case gpus > 1:
		return plural(a.nwhole, "whole GPU")
	case a.nwhole == 0:
		return plural(mig, "MIG device")
	}
	return plural(a.nwhole, "GPU") + " and " + plural(mig, "MIG device")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func flag(name string, value int) string { return name + " " + strconv.Itoa(value) }

// defaultCPUs splits the allowed CPUs evenly among parallel runs: whole
// cores each when every core has the same number of threads and there are
// enough cores, else single CPUs. CPUs left over stay idle.
func (a *Allocator) defaultCPUs(parallel int) int {
	threads := len(a.cores[0].cpus)
	for _, c := range a.cores {
		if len(c.cpus) != threads {
			return len(a.cpus) / parallel
		}
	}
	if len(a.cores) >= parallel {
		return len(a.cores) / parallel * threads
	}
	return len(a.cpus) / parallel
}
