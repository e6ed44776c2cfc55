package pack

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Options says what each run of a sweep asks for by default, and how
// many run at once, in the terms people choose a layout in (runs per GPU,
// a share, GPU memory), which [NewPlan] resolves into a [Request] and a
// number of runs at once for a topology. Zero means a field's default, so
// the zero Options asks for one run per GPU (or MIG device), or one run
// per physical core on a node without GPUs, with the CPUs split evenly.
// Errors and warnings about Options name the fields as [Setting]s.
type Options struct {
	// Parallel is the number of runs at once. Default: the GPUs (or MIG
	// devices) divided by GPUsPerRun, times the runs that share one; on a
	// node without GPUs, the number of physical cores; in either case no
	// more than CPUsPerRun and Mem allow, when they are given.
	Parallel int

	// GPUsPerRun is the number of GPUs each run has to itself. Default: 1
	// on a node with GPUs, unless the runs share GPUs (GPUShare,
	// RunsPerGPU, GPUMem). Values above 1 exclude sharing.
	GPUsPerRun int

	// GPUShare is the share of one GPU each run gets, in thousandths (250
	// is a quarter); the runs share GPUs.
	GPUShare int

	// RunsPerGPU is the number of runs that share one GPU, a share of 1/K
	// each. Default: 1.
	RunsPerGPU int
	// AutoRunsPerGPU chooses it by measurement instead (gpus=auto, see
	// Request.AutoShare): one run per GPU at first, up to AutoRunsPerGPU.
	AutoRunsPerGPU bool

	// GPUMem is the GPU memory each run needs: the runs share GPUs as long
	// as their memory fits (see [Request]). AutoGPUMem measures it instead.
	GPUMem     uint64
	AutoGPUMem bool

	// CPUsPerRun is the number of CPUs per run. Default: the allowed CPUs
	// split evenly among the runs, in whole cores when there are at least
	// as many cores as runs. If there are fewer CPUs than runs, the
	// default lets runs share CPUs (see [Plan]); an explicit value that
	// does not fit is an error. With AutoGPUMem, where the number of runs
	// per GPU is not known before they run, the default is a quarter of
	// the CPUs per GPU.
	CPUsPerRun int

	// Mem is the host memory each run needs; zero means runs start
	// whatever their memory.
	Mem uint64

	// Runs is how many runs the sweep has, when known: the first wave is
	// no more than that, so the plan lays out no more slots (Parallel
	// 1000000 for 4 runs lays out 4), while its Request, checks and
	// warnings are those of Parallel runs. Zero means not known.
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
	// as runs sharing CPUs: sentences for a person, naming the settings
	// that made them.
	Warnings []Note

	// Request is what each run asks for: the Options with their defaults
	// filled in. When runs share CPUs, Request.CPUs is 0.
	Request Request

	// RunsPerGPU is the most slots that share one GPU; 0 without GPUs.
	RunsPerGPU int
}

// Setting is one field of [Options] with the value it was given, as plain
// data, for a caller to word in its own terms (a command line, as the flag
// it binds to the field). Field is the field's name: "Parallel",
// "GPUsPerRun", "GPUShare", "RunsPerGPU", "GPUMem", "CPUsPerRun" or
// "Mem" (AutoGPUMem is GPUMem with Value "auto"). Value is the value as
// text ("12", "0.25", "12GiB"), or "" where the field is meant whatever
// its value.
type Setting struct {
	Field string
	Value string
}

// String returns "Field=Value", or Field alone without a value.
func (s Setting) String() string {
	if s.Value == "" {
		return s.Field
	}
	return s.Field + "=" + s.Value
}

// Note is a sentence about [Options] for a person, with the settings it
// speaks of left open: Text has a %s for each of Settings, in order.
type Note struct {
	Text     string
	Settings []Setting
}

// Words returns the sentence with each setting worded by word, which is
// [Setting.String] when nil.
func (n Note) Words(word func(Setting) string) string {
	if word == nil {
		word = Setting.String
	}
	args := make([]any, len(n.Settings))
	for i, s := range n.Settings {
		args[i] = word(s)
	}
	return fmt.Sprintf(n.Text, args...)
}

// String returns the sentence with the settings worded as Options' fields.
func (n Note) String() string { return n.Words(nil) }

// FitError reports Options that do not fit a topology, or are invalid, as
// data: the problem, naming the settings at fault, and the nearest
// choices that fit. Its Error words them as Options' fields; a command
// line words them as its flags with [FitError.Words]:
//
//	Parallel=12 does not fit 8 GPUs with GPUsPerRun=1: use Parallel=8, or RunsPerGPU=2 with Parallel=16
type FitError struct {
	Problem Note
	// Fixes are the nearest choices that fit, nearest first: each is the
	// settings to give together. May be empty.
	Fixes [][]Setting
}

// Error returns [FitError.Words] with the settings worded as Options' fields.
func (e *FitError) Error() string { return e.Words(nil) }

// Words returns the problem, then the fixes, if any, with each setting
// worded by word (Setting.String when nil).
func (e *FitError) Words(word func(Setting) string) string {
	if word == nil {
		word = Setting.String
	}
	s := e.Problem.Words(word)
	for i, fix := range e.Fixes {
		if i == 0 {
			s += ": use "
		} else {
			s += ", or "
		}
		for j, set := range fix {
			if j > 0 {
				s += " with "
			}
			s += word(set)
		}
	}
	return s
}

// The Fields of Settings.
const (
	fieldParallel   = "Parallel"
	fieldGPUs       = "GPUsPerRun"
	fieldShare      = "GPUShare"
	fieldRunsPerGPU = "RunsPerGPU"
	fieldGPUMem     = "GPUMem"
	fieldCPUs       = "CPUsPerRun"
	fieldMem        = "Mem"
)

// note makes a Note of a format and its arguments: each Setting among
// args (formatted with %s) is left open, the rest are written in.
func note(format string, args ...any) Note {
	const open = "\x00"
	var n Note
	filled := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(Setting); ok {
			n.Settings = append(n.Settings, s)
			filled[i] = open
			continue
		}
		filled[i] = a
	}
	text := strings.ReplaceAll(fmt.Sprintf(format, filled...), "%", "%%")
	n.Text = strings.ReplaceAll(text, open, "%s")
	return n
}

// fitError is a FitError of a problem made by note, and its fixes.
func fitError(problem Note, fixes ...[]Setting) *FitError {
	return &FitError{Problem: problem, Fixes: fixes}
}

func set(field string, value int) Setting { return Setting{field, strconv.Itoa(value)} }

func fix(s ...Setting) []Setting { return s }

// NewSweepPlan is NewPlan for a sweep whose runs may ask for less than
// the plan's request (their own requests): where fewer runs of o's request
// than o.Parallel fit at once, it is the plan without Parallel, with a
// warning, rather than an error. Parallel then caps the runs at once, and
// runs asking for less fill what the plan's runs leave.
func NewSweepPlan(t Topology, o Options) (Plan, error) {
	plan, err := NewPlan(t, o)
	if err == nil || o.Parallel == 0 {
		return plan, err
	}
	capped := o
	capped.Parallel = 0
	fallback, err2 := NewPlan(t, capped)
	if err2 != nil || fallback.Parallel >= o.Parallel {
		return plan, err
	}
	fallback.Warnings = append(fallback.Warnings, note("%v: %d runs asking for %s fit at once; runs asking for less fill the rest, up to %d",
		set("Parallel", o.Parallel), fallback.Parallel, fallback.Request.Describe(fallback.RunsPerGPU), o.Parallel))
	return fallback, nil
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
	wave := parallel
	if req.AutoGPUMem || req.AutoShare {
		// The first run on each GPU is measured alone.
		req.AutoGPUMem, req.AutoShare, req.GPUShare = false, false, GPUWhole
		wave = min(wave, len(a.units))
	}
	perGPU := map[string]int{}
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
		p.Warnings = append(p.Warnings, note("%s leaves room for %s at once on %s: %s idle",
			set(fieldCPUs, o.CPUsPerRun), plural(parallel, "run"), plural(len(a.cpus), "CPU"), plural(len(p.IdleGPUs), "GPU")))
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
// most on one, and what made them that many: the Parallel the caller gave,
// the runs per GPU the caller asked for, or too few CPUs allowed for the
// GPUs, one run each (a batch job that asked for fewer CPUs than its
// GPUs: what to change is the job's request). It names only settings
// the caller gave.
func sharingWarning(o Options, parallel, ncpus, gpus, most int) Note {
	shared := fmt.Sprintf("share %s, up to %d on one CPU", plural(ncpus, "CPU"), most)
	var by Setting
	switch {
	case o.Parallel > 0:
		p := set(fieldParallel, o.Parallel)
		return note("%s: %d runs at once %s; lower %s to give each run CPUs of its own", p, parallel, shared, Setting{Field: fieldParallel})
	case o.RunsPerGPU > 1:
		by = set(fieldRunsPerGPU, o.RunsPerGPU)
	case o.AutoRunsPerGPU:
		return note("%s on %s: up to %d runs at once (%d per GPU, as many as pay) %s; %s gives each run a CPU of its own, with fewer at once",
			Setting{fieldRunsPerGPU, "auto"}, plural(gpus, "GPU"), parallel, AutoRunsPerGPU, shared, set(fieldCPUs, 1))
	case o.GPUShare > 0:
		by = Setting{fieldShare, formatShare(o.GPUShare)}
	case o.GPUMem > 0:
		by = Setting{fieldGPUMem, FormatSize(o.GPUMem)}
	default:
		// The CPUs allowed are the job's (its request, a cpuset, taskset),
		// rarely all the node has: say what a user can change.
		return note("%s allowed here for %s: the %d runs at once (one per GPU) %s; a batch job that asks for a whole node, or for more CPUs, gives each run CPUs of its own",
			plural(ncpus, "CPU"), plural(gpus, "GPU"), parallel, shared)
	}
	return note("%s on %s: %d runs at once %s; %s gives each run a CPU of its own, with fewer at once", by, plural(gpus, "GPU"), parallel, shared, set(fieldCPUs, 1))
}

// resolve fills in the defaults of o and checks that o fits the node.
func (a *Allocator) resolve(o Options) (parallel int, r Request, err error) {
	r, k, err := o.request()
	if err != nil {
		return 0, r, err
	}
	parallel = o.Parallel
	if len(a.units) == 0 {
		if r.UsesGPU() || o.GPUsPerRun > 0 {
			return 0, r, fitError(note("%s does not fit a node without GPUs", o.gpuSetting(r, k)))
		}
		if parallel == 0 {
			parallel = len(a.cores)
		}
	} else {
		if parallel, err = a.gpuParallel(o, &r, k); err != nil {
			return 0, r, err
		}
	}
	if parallel, err = a.memParallel(o, r, parallel); err != nil {
		return 0, r, err
	}
	r.CPUs, parallel, err = a.cpusPerRun(o, r, parallel)
	return parallel, r, err
}

// request checks o on its own and returns the Request it makes, and the
// runs that share one GPU (RunsPerGPU, at least 1). GPUs is left 0 for
// the node to decide.
func (o Options) request() (Request, int, error) {
	for _, f := range []Setting{
		set(fieldParallel, o.Parallel), set(fieldGPUs, o.GPUsPerRun),
		set(fieldRunsPerGPU, o.RunsPerGPU), set(fieldCPUs, o.CPUsPerRun),
	} {
		if f.Value[0] == '-' {
			return Request{}, 0, fitError(note("%s: must not be negative", f))
		}
	}
	gpus, k := o.GPUsPerRun, max(o.RunsPerGPU, 1)
	share := Setting{fieldShare, formatShare(o.GPUShare)}
	switch {
	case gpus > 1 && k > 1:
		return Request{}, 0, fitError(note("%s and %s exclude each other", set(fieldGPUs, gpus), set(fieldRunsPerGPU, k)),
			fix(set(fieldGPUs, gpus)), fix(set(fieldRunsPerGPU, k)))
	case o.GPUShare > 0 && (gpus > 0 || k > 1):
		return Request{}, 0, fitError(note("%s and %s say the same thing twice: give one", share, set(fieldRunsPerGPU, k)))
	case o.GPUShare < 0 || o.GPUShare >= GPUWhole:
		return Request{}, 0, fitError(note("%s: a share is of one GPU, between 0 and 1", share))
	case k > GPUWhole:
		return Request{}, 0, fitError(note("%s: at most %d runs share one GPU", set(fieldRunsPerGPU, k), GPUWhole))
	case o.AutoRunsPerGPU && (gpus > 0 || k > 1 || o.GPUShare > 0):
		return Request{}, 0, fitError(note("%s chooses the runs per GPU: it excludes %s", Setting{fieldRunsPerGPU, "auto"}, o.gpuSetting(Request{GPUs: gpus, GPUShare: o.GPUShare}, k)))
	case o.AutoGPUMem && o.GPUMem > 0:
		return Request{}, 0, fitError(note("%s is a size or auto, not both", Setting{Field: fieldGPUMem}))
	case (o.AutoGPUMem || o.GPUMem > 0) && gpus > 1:
		return Request{}, 0, fitError(note("%s shares GPUs by memory: it excludes %s", Setting{Field: fieldGPUMem}, set(fieldGPUs, gpus)))
	}
	r := Request{GPUs: gpus, GPUShare: o.GPUShare, GPUMem: o.GPUMem, AutoGPUMem: o.AutoGPUMem, AutoShare: o.AutoRunsPerGPU, Mem: o.Mem}
	if k > 1 {
		r.GPUShare = GPUWhole / k
	}
	if r.GPUShare > 0 || r.GPUMem > 0 || r.AutoGPUMem || r.AutoShare {
		r.GPUs = 0
	}
	return r, k, nil
}

// gpuSetting is the setting that asks r's GPUs, as o gave it: with k runs
// per GPU.
func (o Options) gpuSetting(r Request, k int) Setting {
	switch {
	case r.AutoShare:
		return Setting{fieldRunsPerGPU, "auto"}
	case r.GPUMem > 0:
		return Setting{fieldGPUMem, FormatSize(r.GPUMem)}
	case r.AutoGPUMem:
		return Setting{fieldGPUMem, "auto"}
	case k > 1:
		return set(fieldRunsPerGPU, k)
	case r.GPUShare > 0:
		return Setting{fieldShare, formatShare(r.GPUShare)}
	}
	return set(fieldGPUs, max(r.GPUs, o.GPUsPerRun, 1))
}

// gpuParallel fills in r's GPUs on a node with GPUs and returns the runs
// at once: o.Parallel, or as many as the GPUs hold.
func (a *Allocator) gpuParallel(o Options, r *Request, k int) (int, error) {
	if !r.SharesGPU() {
		r.GPUs = max(r.GPUs, 1)
	}
	units := len(a.units)
	if r.GPUs > 1 {
		units = a.nwhole // a MIG device is never combined with others
	}
	if r.GPUs > units {
		return 0, a.tooManyGPUs(r.GPUs, o.Parallel)
	}
	var capacity int
	switch {
	case r.GPUMem > 0:
		if err := a.checkFits(*r); err != nil {
			return 0, fitError(note("%s: %s", o.gpuSetting(*r, k), strings.TrimSuffix(err.Error(), ": "+ErrNeverFits.Error())))
		}
		for _, u := range a.units {
			n := int(u.usable / r.GPUMem)
			switch {
			case r.AutoShare:
				n = min(n, AutoRunsPerGPU)
			case r.GPUShare > 0:
				n = min(n, GPUWhole/r.GPUShare)
			}
			capacity += n
		}
	case r.AutoShare:
		capacity = units * AutoRunsPerGPU
	case r.AutoGPUMem:
		capacity = units
	case r.GPUShare > 0:
		perGPU := GPUWhole / r.GPUShare
		if k > 1 {
			perGPU = k
		}
		capacity = units * perGPU
	case r.GPUs > 1:
		capacity = a.closeGPUsCapacity(*r)
	default:
		capacity = units
	}
	switch {
	case o.Parallel == 0:
		return capacity, nil
	case o.Parallel > capacity:
		return 0, a.tooParallel(o.Parallel, *r, o.gpuSetting(*r, k), capacity)
	}
	return o.Parallel, nil
}

// memParallel checks r's host memory against the node: it lowers the
// default parallel to what the memory holds, and refuses a Parallel it
// does not hold.
func (a *Allocator) memParallel(o Options, r Request, parallel int) (int, error) {
	if r.Mem == 0 {
		return parallel, nil
	}
	mem := Setting{fieldMem, FormatSize(r.Mem)}
	if err := a.checkFits(Request{Mem: r.Mem}); err != nil {
		return 0, fitError(note("%s: %s", mem, strings.TrimSuffix(err.Error(), ": "+ErrNeverFits.Error())))
	}
	most := int(a.memory / r.Mem)
	switch {
	case parallel <= most:
		return parallel, nil
	case o.Parallel > 0:
		return 0, fitError(note("%s with %s needs %s, the node has %s", mem, set(fieldParallel, parallel), FormatSize(r.Mem*uint64(parallel)), FormatSize(a.memory)),
			fix(set(fieldParallel, most)))
	}
	return most, nil
}

// cpusPerRun returns the CPUs each of parallel runs of r gets, 0 when
// more runs than CPUs share them, and the runs at once: without a
// Parallel, no more than o.CPUsPerRun allow.
func (a *Allocator) cpusPerRun(o Options, r Request, parallel int) (cpus, n int, err error) {
	ncpus := len(a.cpus)
	cpus = o.CPUsPerRun
	if o.Parallel == 0 && cpus > 0 && cpus <= ncpus && parallel*cpus > ncpus {
		// No Parallel: as many runs as the CPUs per run allow.
		parallel = ncpus / cpus
	}
	switch {
	case cpus > ncpus:
		most := fix(set(fieldCPUs, ncpus))
		if parallel > 1 {
			most = append(most, set(fieldParallel, 1))
		}
		return 0, 0, fitError(note("%s does not fit %s", set(fieldCPUs, cpus), plural(ncpus, "CPU")), most)
	case cpus > 0 && parallel*cpus > ncpus:
		fe := fitError(note("%s with %s needs %d CPUs, the node has %d", set(fieldCPUs, cpus), set(fieldParallel, parallel), parallel*cpus, ncpus))
		if c := ncpus / parallel; c >= 1 {
			fe.Fixes = append(fe.Fixes, fix(set(fieldCPUs, c)))
		}
		fe.Fixes = append(fe.Fixes, fix(set(fieldParallel, ncpus/cpus)))
		return 0, 0, fe
	case cpus == 0 && r.AutoShare:
		// As many as AutoRunsPerGPU runs on every GPU would get: none of
		// their own (shared CPUs) where the node has fewer CPUs than that.
		cpus = a.defaultCPUs(len(a.units) * AutoRunsPerGPU)
	case cpus == 0 && r.AutoGPUMem:
		cpus = max(a.defaultCPUs(len(a.units))/4, 1)
	case cpus == 0 && parallel <= ncpus:
		cpus = a.defaultCPUs(parallel)
	}
	return cpus, parallel, nil // cpus is 0 when more runs than CPUs: they share CPUs
}

// tooManyGPUs explains a GPUsPerRun larger than the node.
func (a *Allocator) tooManyGPUs(gpus, parallel int) *FitError {
	if a.nwhole == 0 {
		return fitError(note("%s does not fit %s (a run gets at most one)", set(fieldGPUs, gpus), a.unitsPhrase(1)),
			fix(set(fieldGPUs, 1)))
	}
	most := fix(set(fieldGPUs, a.nwhole))
	if parallel > 1 {
		most = append(most, set(fieldParallel, 1))
	}
	return fitError(note("%s does not fit %s", set(fieldGPUs, gpus), a.unitsPhrase(gpus)), most)
}

// tooParallel explains a Parallel above capacity, for runs asking for r
// as with says, suggesting the largest Parallel that fits and the nearest
// change of GPUs per run or runs per GPU that fits the asked Parallel.
func (a *Allocator) tooParallel(parallel int, r Request, with Setting, capacity int) *FitError {
	gpus := max(r.GPUs, 1)
	text := "%s does not fit %s with %s"
	if r.AutoGPUMem {
		text += " (one run per GPU until the first are measured)"
	}
	fe := fitError(note(text, set(fieldParallel, parallel), a.unitsPhrase(gpus), with), fix(set(fieldParallel, capacity)))
	if r.GPUMem > 0 || r.AutoGPUMem {
		return fe
	}
	if g := a.nwhole / parallel; gpus > 1 && g >= 1 {
		fe.Fixes = append(fe.Fixes, fix(set(fieldGPUs, g), set(fieldParallel, parallel)))
		return fe
	}
	units := len(a.units)
	n := (parallel + units - 1) / units // runs per GPU so that parallel fits
	fe.Fixes = append(fe.Fixes, fix(set(fieldRunsPerGPU, n), set(fieldParallel, n*units)))
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
