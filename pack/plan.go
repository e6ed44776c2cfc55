package pack

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Options says how to split a node into the slots of a static [Plan]. Each
// field stands for the command-line flag named in its comment; zero means
// its default, so
// the zero Options asks for one run per GPU (or MIG device), or one run per
// physical core on a node without GPUs, with the CPUs split evenly.
type Options struct {
	// Parallel is the number of runs at once (--parallel). Default: the GPUs
	// (or MIG devices) divided by GPUsPerRun, times RunsPerGPU; on a node
	// without GPUs, the number of physical cores; in either case no more
	// than CPUsPerRun allows, when it is given.
	Parallel int

	// GPUsPerRun is the number of GPUs per run (--gpus-per-run). Default: 1
	// on a node with GPUs. Values above 1 exclude RunsPerGPU above 1.
	GPUsPerRun int

	// RunsPerGPU is the number of runs that share one GPU (--runs-per-gpu).
	// Default: 1.
	RunsPerGPU int

	// CPUsPerRun is the number of CPUs per run (--cpus-per-run). Default: the
	// allowed CPUs split evenly among the runs, in whole cores when there
	// are at least as many cores as runs. If there are fewer CPUs than runs,
	// the default lets runs share CPUs (see [Plan]); an explicit value that
	// does not fit is an error.
	CPUsPerRun int
}

// Plan is a static layout of a node: Parallel slots, each running one run at
// a time on the same Assignment. The zero Plan has no slots.
type Plan struct {
	// Slots are in allocation order: Slots[i].Index == i.
	Slots []Slot

	// IdleGPUs are the GPUs no slot uses, in topology order (by Index).
	IdleGPUs []GPU

	// IdleCPUs are the IDs of the CPUs no slot uses, ascending.
	IdleCPUs []int

	// Warnings describe compromises the plan made instead of failing, such
	// as runs sharing CPUs. They are full sentences for a person.
	Warnings []string

	// Request is what each slot asked the allocator for: the Options with
	// their defaults filled in. When runs share CPUs, Request.CPUs is 1.
	Request Request
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

// NewPlan lays out o.Parallel identical runs on t: it resolves the defaults
// of o and makes that many requests of a fresh [Allocator], so slot i gets
// what the i-th Allocate would. The result depends only on t and o.
//
// When there are more runs than CPUs and o.CPUsPerRun is 0, each run gets
// one CPU, shared with other runs as evenly as possible (the numbers of runs
// on any two CPUs differ by at most one) and near its GPUs where it can;
// those slots have SharedCPUs set and the plan carries a warning.
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
	parallel, req, shareCPUs, err := a.resolve(o)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Request: req}
	each := req
	if shareCPUs {
		each.CPUs = 0 // CPUs are handed out below, shared
	}
	for i := range parallel {
		as, err := a.allocate(each)
		if err != nil {
			// resolve has checked that every slot fits the empty node.
			return Plan{}, fmt.Errorf("plan: slot %d: %w", i, err)
		}
		p.Slots = append(p.Slots, Slot{Index: i, Assignment: as})
	}
	if shareCPUs {
		most := a.shareCPUs(p.Slots)
		p.Request.CPUs = 1
		p.Warnings = append(p.Warnings, fmt.Sprintf(
			"%d runs at once share %d CPUs, up to %d on one CPU: lower --parallel to give each run CPUs of its own",
			parallel, len(a.cpus), most))
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

// resolve fills in the defaults of o and checks that o fits the node.
func (a *Allocator) resolve(o Options) (parallel int, r Request, shareCPUs bool, err error) {
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
			return 0, r, false, &FitError{Problem: fmt.Sprintf("%s %d: must not be negative", f.flag, f.value)}
		}
	}
	gpus, share := o.GPUsPerRun, max(o.RunsPerGPU, 1)
	if gpus > 1 && share > 1 {
		return 0, r, false, &FitError{
			Problem:     fmt.Sprintf("--gpus-per-run %d and --runs-per-gpu %d exclude each other", gpus, share),
			Suggestions: []string{flag("--gpus-per-run", gpus), flag("--runs-per-gpu", share)},
		}
	}

	parallel = o.Parallel
	if len(a.units) == 0 {
		if gpus > 0 {
			return 0, r, false, &FitError{Problem: flag("--gpus-per-run", gpus) + " does not fit a node without GPUs"}
		}
		if share > 1 {
			return 0, r, false, &FitError{Problem: flag("--runs-per-gpu", share) + " does not fit a node without GPUs"}
		}
		if parallel == 0 {
			parallel = len(a.cores)
		}
	} else {
		gpus = max(gpus, 1)
		units := len(a.units)
		if gpus > 1 {
			units = a.nwhole // a MIG device is never combined with others
		}
		if gpus > units {
			return 0, r, false, a.tooManyGPUs(gpus, o.Parallel)
		}
		capacity := units / gpus * share
		if parallel == 0 {
			parallel = capacity
		}
		if parallel > capacity {
			return 0, r, false, a.tooParallel(parallel, gpus, share, capacity)
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
		return 0, r, false, fe
	case cpus > 0 && parallel*cpus > ncpus:
		fe := &FitError{Problem: fmt.Sprintf("--cpus-per-run %d with --parallel %d needs %d CPUs, the node has %d",
			cpus, parallel, parallel*cpus, ncpus)}
		if c := ncpus / parallel; c >= 1 {
			fe.Suggestions = append(fe.Suggestions, flag("--cpus-per-run", c))
		}
		fe.Suggestions = append(fe.Suggestions, flag("--parallel", ncpus/cpus))
		return 0, r, false, fe
	case cpus == 0 && parallel > ncpus:
		shareCPUs = true
	case cpus == 0:
		cpus = a.defaultCPUs(parallel)
	}
	return parallel, Request{GPUs: gpus, RunsPerGPU: share, CPUs: cpus}, shareCPUs, nil
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
func (a *Allocator) tooParallel(parallel, gpus, share, capacity int) *FitError {
	with := flag("--gpus-per-run", gpus)
	if share > 1 {
		with = flag("--runs-per-gpu", share)
	}
	fe := &FitError{
		Problem:     fmt.Sprintf("--parallel %d does not fit %s with %s", parallel, a.unitsPhrase(gpus), with),
		Suggestions: []string{flag("--parallel", capacity)},
	}
	if g := a.nwhole / parallel; gpus > 1 && g >= 1 {
		fe.Suggestions = append(fe.Suggestions, fmt.Sprintf("%s with %s", flag("--gpus-per-run", g), flag("--parallel", parallel)))
		return fe
	}
	units := len(a.units)
	k := (parallel + units - 1) / units // runs per GPU so that parallel fits
	fe.Suggestions = append(fe.Suggestions, fmt.Sprintf("%s with %s", flag("--runs-per-gpu", k), flag("--parallel", k*units)))
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

// shareCPUs gives each slot one CPU when there are more slots than CPUs. A
// first pass gives every slot that can a near CPU of its own; the rest then
// take the least-loaded CPU, nearest first, so no CPU stays idle while
// another is shared and loads differ by at most one. It returns the largest
// number of slots on one CPU.
func (a *Allocator) shareCPUs(slots []Slot) int {
	load := make([]int, len(a.cpus))
	distance := func(s Slot, i int) uint8 {
		if len(s.GPUs) == 0 {
			return distNear
		}
		d := distFar
		for _, g := range s.GPUs {
			d = min(d, a.units[a.unitOf[g.UUID]].distance[a.coreOf[i]])
		}
		return d
	}
	chosen := make([]int, len(slots))
	for s := range slots {
		chosen[s] = -1
		for i := range a.cpus {
			if load[i] == 0 && distance(slots[s], i) == distNear {
				chosen[s] = i
				load[i]++
				break
			}
		}
	}
	for s := range slots {
		if chosen[s] >= 0 {
			continue
		}
		best := 0
		for i := range a.cpus {
			if load[i] < load[best] || load[i] == load[best] && distance(slots[s], i) < distance(slots[s], best) {
				best = i
			}
		}
		chosen[s] = best
		load[best]++
	}
	for s := range slots {
		i := chosen[s]
		slots[s].CPUs = []int{a.cpus[i].ID}
		slots[s].SharedCPUs = load[i] > 1
		slots[s].NUMA = a.numaOf(slots[s].Assignment)
	}
	return slices.Max(load)
}
