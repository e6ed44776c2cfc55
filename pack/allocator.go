package pack

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrBusy is returned (wrapped) by [Allocator.Allocate] when a request does
// not fit the resources free now but would fit the empty node: the caller
// should wait for a run to end and try again.
var ErrBusy = errors.New("resources busy")

// ErrNeverFits is returned (wrapped, with the reason) by [Allocator.Allocate]
// and [Allocator.Check] when a request cannot fit even the empty node, so
// waiting would never help.
var ErrNeverFits = errors.New("never fits this node")

// Allocator hands out GPUs, CPUs and host memory of one node to runs as
// they start and takes them back as they end.
//
// An Allocator is safe for concurrent use by multiple goroutines; calls are
// serialized, and the placements depend only on the topology and the order
// in which the calls are made. The zero Allocator has no CPUs and no GPUs, so
// every request fails with [ErrNeverFits]; use [NewAllocator].
type Allocator struct {
	mu  sync.Mutex
	err error // from Topology.Validate; reported by every Allocate

	cpus     []CPU       // allowed CPUs by ascending ID
	cpuIndex map[int]int // CPU ID → index in cpus
	held     []bool      // by index in cpus: a run has the CPU to itself
	load     []int       // by index in cpus: runs sharing the CPU (Request.CPUs == 0)
	nfree    int         // CPUs neither held nor shared
	cores    []core      // physical cores, by lowest CPU ID
	coreOf   []int       // index in cpus → index in cores
	nodes    []numaNode  // NUMA nodes that have CPUs, by ascending id
	units    []unit      // schedulable GPUs, by Index (stable)
	unitOf   map[string]int
	nwhole   int // number of whole (non-MIG) GPUs

	memory  uint64 // host memory runs may claim; 0 when unknown
	memUsed uint64

	bare      int  // runs of the zero Request placed and not released
	bareLimit int  // LimitBare's; 0 for none
	spread    bool // Spread: prefer the GPUs placed on least since
}

// core is one physical core: its allowed hyperthreads. A restricted cpuset
// may leave a core with fewer threads than its siblings elsewhere.
type core struct {
	cpus   []int // indices into Allocator.cpus, ascending
	free   int   // how many of cpus are neither held nor shared
	numa   int
	socket int
}

// Distance of a core from where a run would like its CPUs to be. Placement
// takes near cores first, then cores on the same socket (or in the GPU's
// LocalCPUs), then the rest.
const (
	distNear   uint8 = 0
	distSocket uint8 = 1
	distFar    uint8 = 2
)

// numaNode is the home of a CPU-only run.
type numaNode struct {
	id       int
	distance []uint8 // by core index
}

// unit is one schedulable GPU and what the runs on it claim.
type unit struct {
	gpu      GPU
	distance []uint8 // by core index
	socket   int     // socket of its near cores; -1 when unknown or several
	usable   uint64  // memory sharers may claim: MemoryBytes less the headroom; 0 when unknown

	own   bool   // one run has it to itself
	runs  int    // runs on it
	share int    // thousandths claimed by the runs sharing it
	mem   uint64 // memory claimed by the runs sharing it
	held  bool   // Hold: no run may be placed on it
	// retired: out of use for good (Retire); it is also held.
	retired bool
	// reserved: a run the queue holds for will take it once it frees, so
	// no run behind that one may be placed on it (see allocateBehind).
	reserved bool
	// spreadRuns counts the runs placed on it since Spread(true).
	spreadRuns int
}

// free reports whether no run is on the unit and one may be placed on it.
func (u *unit) free() bool { return u.runs == 0 && !u.closed() }

// closed reports whether no new run may be placed on the unit.
func (u *unit) closed() bool { return u.held || u.reserved }

// NewAllocator returns an Allocator with every CPU and GPU of t free. It
// copies t; later changes to t do not affect the Allocator.
//
// If t is invalid (see [Topology.Validate]), every Allocate and Check call
// returns that error.
func NewAllocator(t Topology) *Allocator {
	a := &Allocator{}
	if err := t.Validate(); err != nil {
		a.err = err
		return a
	}
	a.memory = t.Memory

	a.cpus = slices.Clone(t.CPUs)
	slices.SortFunc(a.cpus, func(x, y CPU) int { return cmp.Compare(x.ID, y.ID) })
	a.cpuIndex = make(map[int]int, len(a.cpus))
	a.held = make([]bool, len(a.cpus))
	a.load = make([]int, len(a.cpus))
	a.nfree = len(a.cpus)
	a.coreOf = make([]int, len(a.cpus))
	// Core ids repeat across sockets, so a core is keyed by (socket, core).
	// CPUs are visited by ascending ID, so cores come out ordered by their
	// lowest CPU ID, as kubelet numbers them.
	type coreKey struct{ socket, core int }
	coreIndex := make(map[coreKey]int)
	for i, c := range a.cpus {
		a.cpuIndex[c.ID] = i
		k := coreKey{c.Socket, c.Core}
		j, ok := coreIndex[k]
		if !ok {
			j = len(a.cores)
			coreIndex[k] = j
			a.cores = append(a.cores, core{numa: c.NUMA, socket: c.Socket})
		}
		a.cores[j].cpus = append(a.cores[j].cpus, i)
		a.cores[j].free++
		a.coreOf[i] = j
	}

	var numaIDs []int
	for _, c := range a.cores {
		numaIDs = append(numaIDs, c.numa)
	}
	slices.Sort(numaIDs)
	numaIDs = slices.Compact(numaIDs)
	for _, id := range numaIDs {
		isNear := make([]bool, len(a.cores))
		for j, c := range a.cores {
			isNear[j] = c.numa == id
		}
		a.nodes = append(a.nodes, numaNode{id: id, distance: a.distances(isNear, nil)})
	}

	gpus := slices.Clone(t.GPUs)
	slices.SortStableFunc(gpus, func(x, y GPU) int { return cmp.Compare(x.Index, y.Index) })
	a.unitOf = make(map[string]int, len(gpus))
	for i, g := range gpus {
		g.LocalCPUs = slices.Clone(g.LocalCPUs)
		a.unitOf[g.UUID] = i
		if !g.MIG {
			a.nwhole++
		}
		a.units = append(a.units, a.newUnit(g))
	}
	return a
}

// newUnit works out which cores are near g: those on its NUMA node when the
// node is known and has allowed CPUs, else those in its LocalCPUs. When
// neither is known, every core is near: there is nothing to prefer.
func (a *Allocator) newUnit(g GPU) unit {
	local := make(map[int]bool, len(g.LocalCPUs))
	for _, id := range g.LocalCPUs {
		local[id] = true
	}
	inLocal := make([]bool, len(a.cores))
	isNear := make([]bool, len(a.cores))
	anyNUMA, anyLocal := false, false
	for j, c := range a.cores {
		for _, i := range c.cpus {
			if local[a.cpus[i].ID] {
				inLocal[j] = true
				anyLocal = true
			}
		}
		if g.NUMA >= 0 && c.numa == g.NUMA {
			isNear[j] = true
			anyNUMA = true
		}
	}
	if !anyNUMA {
		isNear = inLocal
	}
	u := unit{gpu: g, socket: -1}
	if g.MemoryBytes > GPUMemHeadroom(g.MemoryBytes) {
		u.usable = g.MemoryBytes - GPUMemHeadroom(g.MemoryBytes)
	}
	if !anyNUMA && !anyLocal {
		u.distance = make([]uint8, len(a.cores)) // all near
	} else {
		u.distance = a.distances(isNear, inLocal)
		sockets := map[int]bool{}
		for j, c := range a.cores {
			if isNear[j] {
				sockets[c.socket] = true
				u.socket = c.socket
			}
		}
		if len(sockets) != 1 {
			u.socket = -1
		}
	}
	return u
}

// distances grades every core: near, on a socket of a near core or in
// alsoClose, or far.
func (a *Allocator) distances(isNear, alsoClose []bool) []uint8 {
	sockets := map[int]bool{}
	for j, c := range a.cores {
		if isNear[j] {
			sockets[c.socket] = true
		}
	}
	d := make([]uint8, len(a.cores))
	for j, c := range a.cores {
		switch {
		case isNear[j]:
			d[j] = distNear
		case sockets[c.socket] || (alsoClose != nil && alsoClose[j]):
			d[j] = distSocket
		default:
			d[j] = distFar
		}
	}
	return d
}

// Check reports whether r is valid and could fit the empty node. It returns
// nil, an error wrapping [ErrNeverFits] that says what the node has, or an
// error describing an invalid request, so callers can reject a request up
// front instead of waiting for resources that will never come. A request
// with AutoGPUMem or AutoShare passes when a run sharing a GPU would.
func (a *Allocator) Check(r Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.check(r); err != nil {
		return fmt.Errorf("%v: %w", r, err)
	}
	return nil
}

func (a *Allocator) check(r Request) error {
	if a.err != nil {
		return a.err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	return a.checkFits(r)
}

// checkFits reports whether the valid request r fits the empty node.
func (a *Allocator) checkFits(r Request) error {
	never := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNeverFits)
	}
	switch {
	case r.UsesGPU() && len(a.units) == 0:
		return never("the node has no GPUs")
	case r.UsesGPU() && a.inUse() == 0:
		return never("every GPU of the node was taken out of use after a fault")
	case r.GPUs > 1 && r.GPUs > a.nwhole:
		mig := ""
		if a.nwhole < a.inUse() {
			mig = " (a run gets at most one MIG device)"
		}
		return never("the node has %s%s", plural(a.nwhole, "whole GPU"), mig)
	case r.CPUs > len(a.cpus):
		return never("the node has %s", plural(len(a.cpus), "CPU"))
	case len(a.cpus) == 0:
		return never("the node has no CPUs")
	case r.Mem > 0 && a.memory == 0:
		return never("the node's memory is not known, so mem cannot be granted")
	case r.Mem > a.memory:
		return never("the node has %s of memory for runs", FormatSize(a.memory))
	}
	if r.GPUMem == 0 && !r.AutoGPUMem {
		return nil
	}
	var largest *unit
	big := 0
	for i := range a.units {
		u := &a.units[i]
		if u.retired {
			continue
		}
		size := u.gpu.MemoryBytes
		if r.SharesGPU() {
			size = u.usable
		}
		if largest == nil || u.gpu.MemoryBytes > largest.gpu.MemoryBytes {
			largest = u
		}
		if size >= r.GPUMem && (r.GPUs <= 1 || !u.gpu.MIG) {
			big++
		}
	}
	switch {
	case largest.gpu.MemoryBytes == 0 && r.AutoGPUMem:
		return never("the GPUs' memory is not known (no NVML), so gpu_mem=auto cannot share them")
	case largest.gpu.MemoryBytes == 0:
		return never("the GPUs' memory is not known (no NVML), so gpu_mem cannot be granted")
	case big < max(r.GPUs, 1) && r.SharesGPU():
		total := largest.gpu.MemoryBytes
		return never("a run sharing a GPU may claim at most %s of its memory (%s less %s headroom)",
			FormatSize(largest.usable), FormatSize(total), FormatSize(GPUMemHeadroom(total)))
	case big < max(r.GPUs, 1):
		return never("the node has %s with %s", plural(big, "GPU"), FormatSize(r.GPUMem))
	}
	return nil
}

// Allocate takes the GPUs, CPUs and memory for one run from the free pool.
//
// It returns an error wrapping [ErrBusy] when r does not fit what is free
// now but would fit the empty node, an error wrapping [ErrNeverFits] when it
// would not, and another error when r is invalid or asks for AutoGPUMem,
// which the caller turns into a GPUMem or GPUShare first. On error nothing
// is taken.
//
// The returned Assignment lists CPUs in ascending order and GPUs in topology
// order (by Index). Give it back with Release when the run ends.
func (a *Allocator) Allocate(r Request) (Assignment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	as, err := a.allocate(r)
	if err != nil {
		return Assignment{}, fmt.Errorf("allocate %v: %w", r, err)
	}
	return as, nil
}

// allocateBehind allocates r for a run waiting behind one that asks for
// first and holds the queue (see [Queue]): r may not take the GPUs first
// waits for (reserved, from reserveUnits), and must leave at least as many
// free CPUs and as much free memory as first asks for, so that it cannot
// delay first.
func (a *Allocator) allocateBehind(first Request, reserved []int, r Request) (Assignment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.check(r); err != nil {
		return Assignment{}, fmt.Errorf("allocate %v: %w", r, err)
	}
	if r.AutoGPUMem || r.AutoShare {
		return Assignment{}, fmt.Errorf("allocate %v: gpu_mem=auto and gpus=auto: resolve them to a size or a share first", r)
	}
	// A run sharing a CPU takes at most one more CPU out of the free ones.
	if first.CPUs > 0 && a.nfree-max(r.CPUs, 1) < first.CPUs || a.memory-a.memUsed < first.Mem+r.Mem {
		return Assignment{}, fmt.Errorf("allocate %v: the cpus and memory left are held for %v: %w", r, first, ErrBusy)
	}
	for _, i := range reserved {
		a.units[i].reserved = true
	}
	defer func() {
		for _, i := range reserved {
			a.units[i].reserved = false
		}
	}()
	as, err := a.place(r)
	if err != nil {
		return Assignment{}, fmt.Errorf("allocate %v: %w", r, err)
	}
	return as, nil
}

// reserveUnits chooses the GPUs a run asking for r waits for: those that
// are closest to free (fewest runs on them), as close together as
// pickUnits would place them; none for a CPU-only run. The caller keeps
// its choice until the run starts: no new run is placed on them, so they
// only free up.
func (a *Allocator) reserveUnits(r Request) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !r.UsesGPU() {
		return nil
	}
	n := max(r.GPUs, 1)
	fits := func(u *unit) bool {
		switch {
		case r.GPUs > 1:
			return !u.gpu.MIG && u.gpu.MemoryBytes >= r.GPUMem
		case r.SharesGPU():
			return r.GPUMem == 0 || u.usable >= r.GPUMem
		}
		return u.gpu.MemoryBytes >= r.GPUMem
	}
	groups := a.closeGroups(n, fits)
	var best []int
	bestBusy := 0
	for _, g := range groups {
		if len(g) < n {
			continue
		}
		g = slices.Clone(g)
		slices.SortStableFunc(g, func(x, y int) int { return cmp.Compare(a.units[x].runs, a.units[y].runs) })
		busy := 0
		for _, i := range g[:n] {
			busy += a.units[i].runs
		}
		if best == nil || busy < bestBusy {
			best, bestBusy = g[:n], busy
		}
	}
	return best
}

// allocate is Allocate with a.mu held.
func (a *Allocator) allocate(r Request) (Assignment, error) {
	if err := a.check(r); err != nil {
		return Assignment{}, err
	}
	if r.AutoGPUMem || r.AutoShare {
		return Assignment{}, errors.New("gpu_mem=auto and gpus=auto: resolve them to a size or a share first")
	}
	return a.place(r)
}

// place places r, which check has accepted.
//
// GPUs are chosen first, scored by how many of the run's CPUs they let it
// take near them; CPUs are then taken nearest first, whole cores first.
func (a *Allocator) place(r Request) (Assignment, error) {
	switch {
	case r.Mem > a.memory-a.memUsed:
		return Assignment{}, fmt.Errorf("%s of %s memory free: %w", FormatSize(a.memory-a.memUsed), FormatSize(a.memory), ErrBusy)
	case r.CPUs > a.nfree:
		return Assignment{}, fmt.Errorf("%d of %d cpus free: %w", a.nfree, len(a.cpus), ErrBusy)
	case r.CPUs == 0 && !slices.Contains(a.held, false):
		return Assignment{}, fmt.Errorf("every cpu is held: %w", ErrBusy)
	case r == Request{} && a.bareLimit > 0 && a.bare >= a.bareLimit:
		return Assignment{}, fmt.Errorf("%d runs that hold nothing of their own run already: %w", a.bare, ErrBusy)
	}
	var picked []int // unit indices
	var distance []uint8
	switch {
	case r.GPUs > 1:
		picked, distance = a.pickUnits(r)
		if picked == nil {
			return Assignment{}, fmt.Errorf("fewer than %d whole gpus free: %w", r.GPUs, ErrBusy)
		}
	case r.UsesGPU():
		u := a.pickUnit(r)
		if u < 0 {
			return Assignment{}, fmt.Errorf("no gpu free: %w", ErrBusy)
		}
		picked = []int{u}
		distance = a.units[u].distance
	default:
		distance = a.pickNode(r.CPUs)
	}

	as := Assignment{Request: r, SharedGPUs: r.SharesGPU(), SharedCPUs: r.CPUs == 0}
	if r == (Request{}) {
		a.bare++
	}
	for _, i := range picked {
		u := &a.units[i]
		u.runs++
		if a.spread {
			u.spreadRuns++
		}
		if r.SharesGPU() {
			u.share += r.GPUShare
			u.mem += u.claim(r)
		} else {
			u.own = true
		}
		g := u.gpu
		g.LocalCPUs = slices.Clone(g.LocalCPUs)
		as.GPUs = append(as.GPUs, g)
	}
	if r.CPUs == 0 {
		i := a.pickSharedCPU(distance)
		a.share(i, +1)
		as.CPUs = []int{a.cpus[i].ID}
	} else {
		for _, i := range a.takeCPUs(distance, r.CPUs) {
			as.CPUs = append(as.CPUs, a.cpus[i].ID)
		}
		slices.Sort(as.CPUs)
	}
	a.memUsed += r.Mem
	as.NUMA = a.numaOf(as)
	return as, nil
}

// claim is the GPU memory a run sharing u claims: its GPUMem, else its
// share of the memory, so that runs asking for a share and runs asking
// for memory can share one GPU without crowding each other out.
func (u *unit) claim(r Request) uint64 {
	if r.GPUMem > 0 {
		return r.GPUMem
	}
	return u.usable / GPUWhole * uint64(r.GPUShare)
}

// fitsSharer reports whether a run sharing a GPU fits on u now.
func (u *unit) fitsSharer(r Request) bool {
	if u.own || u.closed() || u.share+r.GPUShare > GPUWhole {
		return false
	}
	if r.GPUMem > 0 && u.usable == 0 {
		return false
	}
	return u.mem+u.claim(r) <= u.usable || u.usable == 0
}

// numaOf returns the NUMA node shared by all of as's CPUs and GPUs, or -1.
func (a *Allocator) numaOf(as Assignment) int {
	numa := -2 // none seen yet
	same := func(n int) {
		if numa == -2 {
			numa = n
		} else if numa != n {
			numa = -1
		}
	}
	for _, id := range as.CPUs {
		same(a.cpus[a.cpuIndex[id]].NUMA)
	}
	for _, g := range as.GPUs {
		same(g.NUMA)
	}
	return max(numa, -1)
}

// score ranks a candidate placement; see better.
type score struct {
	level     int    // multi-GPU runs: 0 one NUMA node, 1 one socket, 2 anywhere
	spread    int    // with Spread: runs placed on its GPUs since; fewer is better
	wholeNear int    // CPUs the run could take near, in whole free cores (capped at the request)
	allNear   int    // CPUs the run could take near (capped at the request)
	joins     bool   // shares a GPU already in use, which keeps other GPUs whole
	slack     int    // share left on the GPU after the run joins it; less is a tighter fit
	memSlack  uint64 // GPU memory left after the run joins it
	nodeFree  int    // free GPUs on the candidate's NUMA node; fewer keeps nodes with many free GPUs for multi-GPU runs
	order     int
}

func (s score) better(t score) bool {
	switch {
	case s.level != t.level:
		return s.level < t.level
	case s.spread != t.spread:
		return s.spread < t.spread
	case s.wholeNear != t.wholeNear:
		return s.wholeNear > t.wholeNear
	case s.allNear != t.allNear:
		return s.allNear > t.allNear
	case s.joins != t.joins:
		return s.joins
	case s.slack != t.slack:
		return s.slack < t.slack
	case s.memSlack != t.memSlack:
		return s.memSlack < t.memSlack
	case s.nodeFree != t.nodeFree:
		return s.nodeFree < t.nodeFree
	}
	return s.order < t.order
}

// nearCPUs counts the free CPUs a run could take on near cores:
// in whole free cores, and in all. Both are capped at want.
func (a *Allocator) nearCPUs(distance []uint8, want int) (whole, all int) {
	for j, c := range a.cores {
		if distance[j] != distNear {
			continue
		}
		all += c.free
		if c.free == len(c.cpus) {
			whole += c.free
		}
	}
	return min(whole, want), min(all, want)
}

// freeUnitsByNode counts the free GPUs on each NUMA node, by the GPUs' own
// NUMA ids (a node whose CPUs this job may not use still has GPUs).
func (a *Allocator) freeUnitsByNode() map[int]int {
	n := map[int]int{}
	for i := range a.units {
		if u := &a.units[i]; u.gpu.NUMA >= 0 && u.free() {
			n[u.gpu.NUMA]++
		}
	}
	return n
}

// pickNode chooses the home NUMA node of a CPU-only run: the one with the
// most CPUs for it, preferring nodes with fewer free GPUs so that the CPUs
// near free GPUs stay free for GPU runs.
func (a *Allocator) pickNode(cpus int) []uint8 {
	nodeFree := a.freeUnitsByNode()
	best, bestScore := -1, score{}
	for n, node := range a.nodes {
		whole, all := a.nearCPUs(node.distance, max(cpus, 1))
		s := score{wholeNear: whole, allNear: all, nodeFree: nodeFree[node.id], order: n}
		if best < 0 || s.better(bestScore) {
			best, bestScore = n, s
		}
	}
	return a.nodes[best].distance // check has made sure there are CPUs
}

// pickUnit chooses the GPU for a run with one GPU of its own or a share of
// one, or returns -1 when none is available.
func (a *Allocator) pickUnit(r Request) int {
	nodeFree := a.freeUnitsByNode()
	best, bestScore := -1, score{}
	for i := range a.units {
		u := &a.units[i]
		s := score{order: i}
		switch {
		case r.SharesGPU():
			if !u.fitsSharer(r) {
				continue
			}
			s.joins = u.runs > 0
			s.slack = GPUWhole - u.share - r.GPUShare
			if u.usable > 0 {
				s.memSlack = u.usable - u.mem - u.claim(r)
			}
		case !u.free() || u.gpu.MemoryBytes < r.GPUMem:
			continue
		}
		s.wholeNear, s.allNear = a.nearCPUs(u.distance, r.CPUs)
		s.nodeFree = nodeFree[u.gpu.NUMA]
		s.spread = u.spreadRuns
		if best < 0 || s.better(bestScore) {
			best, bestScore = i, s
		}
	}
	return best
}

// pickUnits chooses r.GPUs free whole GPUs for one run, as close together
// as the node allows: from one NUMA node when some NUMA node has that many
// GPUs at all, else from one socket when some socket has, else anywhere.
// A run waits for GPUs close together rather than take GPUs apart
// that happen to be free, since GPUs far apart slow every step of a
// multi-GPU run (see localityLevel). It returns the GPUs and the distance
// of each core from the nearest of them, or nil when they are not free.
func (a *Allocator) pickUnits(r Request) ([]int, []uint8) {
	n := r.GPUs
	fits := func(u *unit) bool { return !u.gpu.MIG && u.gpu.MemoryBytes >= r.GPUMem }
	var free []int
	for i := range a.units {
		if u := &a.units[i]; fits(u) && u.free() {
			free = append(free, i)
		}
	}
	if len(free) < n {
		return nil, nil
	}
	allowed := a.localityLevel(n, fits)
	nodeFree := a.freeUnitsByNode()
	var best []int
	var bestDistance []uint8
	var bestScore score
	consider := func(level int, group []int) {
		if len(group) < n || level > allowed {
			return
		}
		group = group[:n]
		distance := slices.Clone(a.units[group[0]].distance)
		for _, u := range group[1:] {
			for j, d := range a.units[u].distance {
				distance[j] = min(distance[j], d)
			}
		}
		whole, all := a.nearCPUs(distance, r.CPUs)
		s := score{level: level, wholeNear: whole, allNear: all, order: group[0]}
		for _, u := range group {
			s.spread += a.units[u].spreadRuns
		}
		if level == 0 {
			s.nodeFree = nodeFree[a.units[group[0]].gpu.NUMA]
		}
		if best == nil || s.better(bestScore) {
			best, bestDistance, bestScore = group, distance, s
		}
	}
	for _, numa := range groupsOf(a.units, free, func(u *unit) int { return u.gpu.NUMA }) {
		consider(0, numa)
	}
	for _, socket := range groupsOf(a.units, free, func(u *unit) int { return u.socket }) {
		consider(1, socket)
	}
	consider(2, free)
	return best, bestDistance
}

// localityLevel is how far apart the n GPUs of one run may be on this
// node: 0 when some NUMA node has n GPUs that fit, 1 when some socket
// has, else 2 (anywhere). It counts the node's GPUs, busy or not, so a
// run that could have GPUs close together waits for them.
func (a *Allocator) localityLevel(n int, fits func(*unit) bool) int {
	var all []int
	for i := range a.units {
		if fits(&a.units[i]) {
			all = append(all, i)
		}
	}
	for level, key := range []func(*unit) int{
		func(u *unit) int { return u.gpu.NUMA },
		func(u *unit) int { return u.socket },
	} {
		for _, group := range groupsOf(a.units, all, key) {
			if len(group) >= n {
				return level
			}
		}
	}
	return 2
}

// closeGPUsCapacity is how many runs of r.GPUs whole GPUs fit the empty
// node at once, each with its GPUs as close together as pickUnits places
// them: every NUMA node (or socket) gives as many runs as it has r.GPUs
// GPUs.
func (a *Allocator) closeGPUsCapacity(r Request) int {
	n := 0
	for _, g := range a.closeGroups(r.GPUs, func(u *unit) bool { return !u.gpu.MIG && u.gpu.MemoryBytes >= r.GPUMem }) {
		n += len(g) / r.GPUs
	}
	return n
}

// closeGroups splits the GPUs that fits accepts into the groups n GPUs of
// one run must come from: NUMA nodes, sockets or the whole node, at the
// localityLevel of n; for one GPU, the whole node.
func (a *Allocator) closeGroups(n int, fits func(*unit) bool) [][]int {
	var all []int
	for i := range a.units {
		if fits(&a.units[i]) {
			all = append(all, i)
		}
	}
	if n <= 1 {
		return [][]int{all}
	}
	switch a.localityLevel(n, fits) {
	case 0:
		return groupsOf(a.units, all, func(u *unit) int { return u.gpu.NUMA })
	case 1:
		return groupsOf(a.units, all, func(u *unit) int { return u.socket })
	}
	return [][]int{all}
}

// groupsOf splits the units at indices by key, in order of first
// appearance, leaving out those whose key is unknown (negative).
func groupsOf(units []unit, indices []int, key func(*unit) int) [][]int {
	var keys []int
	byKey := map[int][]int{}
	for _, i := range indices {
		k := key(&units[i])
		if k < 0 {
			continue
		}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	groups := make([][]int, len(keys))
	for i, k := range keys {
		groups[i] = byKey[k]
	}
	return groups
}

// takeCPUs takes n free CPUs, nearest first, and marks them held. At each
// distance it takes whole free cores that fit what is still wanted, then
// threads of cores that are already split, and only then splits a whole
// core, as kubelet's takeByTopology does. It returns indices into a.cpus.
// The caller has checked that n CPUs are free.
func (a *Allocator) takeCPUs(distance []uint8, n int) []int {
	taken := make([]int, 0, n)
	take := func(c *core, k int) {
		for _, i := range c.cpus {
			if k == 0 {
				return
			}
			if a.isFree(i) {
				a.held[i] = true
				c.free--
				a.nfree--
				taken = append(taken, i)
				k--
			}
		}
	}
	for d := distNear; d <= distFar && len(taken) < n; d++ {
		for j := range a.cores {
			if c := &a.cores[j]; distance[j] == d && c.free == len(c.cpus) && c.free <= n-len(taken) {
				take(c, c.free)
			}
		}
		for j := range a.cores {
			if c := &a.cores[j]; distance[j] == d && c.free > 0 && c.free < len(c.cpus) {
				take(c, n-len(taken))
			}
		}
		for j := range a.cores {
			if c := &a.cores[j]; distance[j] == d && c.free > 0 {
				take(c, n-len(taken))
			}
		}
	}
	return taken
}

// isFree reports whether CPU index i is neither held nor shared.
func (a *Allocator) isFree(i int) bool { return !a.held[i] && a.load[i] == 0 }

// pickSharedCPU chooses the CPU for a run that shares one: the least
// loaded CPU no run holds, the nearest of those, then the lowest. The
// caller has checked that some CPU is not held.
func (a *Allocator) pickSharedCPU(distance []uint8) int {
	best := -1
	for i := range a.cpus {
		if a.held[i] {
			continue
		}
		if best < 0 || a.load[i] < a.load[best] ||
			a.load[i] == a.load[best] && distance[a.coreOf[i]] < distance[a.coreOf[best]] {
			best = i
		}
	}
	return best
}

// share adds delta runs to the sharers of CPU index i.
func (a *Allocator) share(i, delta int) {
	wasFree := a.load[i] == 0
	a.load[i] += delta
	if isFree := a.load[i] == 0; wasFree != isFree {
		step := 1
		if !isFree {
			step = -1
		}
		a.cores[a.coreOf[i]].free += step
		a.nfree += step
	}
}

// Release gives back the GPUs, CPUs and memory of as, which must have been
// returned by Allocate (or Resize) on a and not released since. Release
// panics if as holds a CPU or GPU that a does not consider taken: that is
// a bug in the caller, and going on would hand the same CPU to two runs.
func (a *Allocator) Release(as Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := as.Request
	seen := make(map[int]bool, len(as.CPUs))
	for _, id := range as.CPUs {
		i, ok := a.cpuIndex[id]
		if !ok || seen[id] || r.CPUs > 0 && !a.held[i] || r.CPUs == 0 && a.load[i] == 0 {
			panic(fmt.Sprintf("pack: release of cpu %d, which is not allocated", id))
		}
		seen[id] = true
	}
	held := make(map[int]bool, len(as.GPUs))
	for _, g := range as.GPUs {
		i, ok := a.unitOf[g.UUID]
		if !ok || held[i] {
			panic(fmt.Sprintf("pack: release of gpu %s, which is not allocated", g.UUID))
		}
		u := &a.units[i]
		if u.runs == 0 || u.own == r.SharesGPU() || r.SharesGPU() && (u.share < r.GPUShare || u.mem < u.claim(r)) {
			panic(fmt.Sprintf("pack: release of gpu %s, which is not allocated", g.UUID))
		}
		held[i] = true
	}
	if a.memUsed < r.Mem {
		panic(fmt.Sprintf("pack: release of %s of memory, of which %s is allocated", FormatSize(r.Mem), FormatSize(a.memUsed)))
	}
	for _, id := range as.CPUs {
		i := a.cpuIndex[id]
		if r.CPUs == 0 {
			a.share(i, -1)
			continue
		}
		a.held[i] = false
		a.cores[a.coreOf[i]].free++
		a.nfree++
	}
	for _, g := range as.GPUs {
		u := &a.units[a.unitOf[g.UUID]]
		u.runs--
		if r.SharesGPU() {
			u.share -= r.GPUShare
			u.mem -= u.claim(r)
		} else {
			u.own = false
		}
	}
	a.memUsed -= r.Mem
	if r == (Request{}) {
		a.bare--
	}
}

// Resize changes what a run sharing a GPU claims of it, keeping its GPU,
// CPUs and memory: a run started with a share of a GPU, whose memory use
// has been measured, can claim just that memory and let others join. as
// must have been returned by Allocate (or Resize) and not released; r must
// share a GPU and differ from as.Request in GPUShare and GPUMem only. It
// returns the new Assignment, to be released in place of as, or an error
// wrapping [ErrBusy] when r does not fit the GPU now, and then as stands.
// Resize ignores Hold: the run is on the GPU already.
func (a *Allocator) Resize(as Assignment, r Request) (Assignment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := as.Request
	switch {
	case a.err != nil:
		return as, a.err
	case !old.SharesGPU() || len(as.GPUs) != 1:
		return as, fmt.Errorf("resize %v: the run does not share a GPU", old)
	}
	if err := r.Validate(); err != nil || !r.SharesGPU() || r.AutoGPUMem ||
		r.CPUs != old.CPUs || r.Mem != old.Mem || r.GPUs != old.GPUs {
		return as, fmt.Errorf("resize %v to %v: a run may change only its share of its GPU", old, r)
	}
	i, ok := a.unitOf[as.GPUs[0].UUID]
	if !ok || a.units[i].runs == 0 || a.units[i].own {
		panic(fmt.Sprintf("pack: resize on gpu %s, which is not allocated", as.GPUs[0].UUID))
	}
	u := &a.units[i]
	u.share -= old.GPUShare
	u.mem -= u.claim(old)
	held, reserved := u.held, u.reserved
	u.held, u.reserved = false, false
	fits := u.fitsSharer(r)
	u.held, u.reserved = held, reserved
	if !fits {
		u.share += old.GPUShare
		u.mem += u.claim(old)
		return as, fmt.Errorf("resize %v to %v: %w", old, r, ErrBusy)
	}
	u.share += r.GPUShare
	u.mem += u.claim(r)
	as.Request = r
	return as, nil
}

// Spread, while on, places each run on the GPUs the fewest runs were
// placed on since it was turned on (before any other preference but
// keeping a multi-GPU run's GPUs close together), so that the first runs
// of a sweep, started one after another, land on distinct GPUs even when
// each ends before the next starts. Turning it on or off forgets what was
// placed before.
func (a *Allocator) Spread(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.spread = on
	for i := range a.units {
		a.units[i].spreadRuns = 0
	}
}

// LimitBare lets at most n runs of the zero Request — runs that hold no
// GPU, no CPU of their own (one shared CPU) and no memory, so that nothing
// else bounds how many run at once — be placed at once; 0 (the default)
// lets any number be. Allocate then returns an error wrapping [ErrBusy]
// for such a run while n of them are placed.
func (a *Allocator) LimitBare(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bareLimit = max(n, 0)
}

// Hold keeps every new run off the GPU with the given UUID until Unhold:
// a run sharing it by memory may not have allocated its memory yet, so the
// next one waits until it has (a readiness gate). Runs already on the GPU
// keep it. Unknown UUIDs are ignored.
func (a *Allocator) Hold(uuid string) { a.setHeld(uuid, true) }

// Unhold ends a Hold.
func (a *Allocator) Unhold(uuid string) { a.setHeld(uuid, false) }

func (a *Allocator) setHeld(uuid string, held bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.unitOf[uuid]; ok {
		a.units[i].held = held || a.units[i].retired
	}
}

// Retire takes the GPU uuid out of use for good, after it reported a
// fault: no run is placed on it again, runs already on it keep their
// Assignment until Release, and a request that the GPUs left cannot serve
// now fails with [ErrNeverFits]. A physical GPU's MIG devices retire with
// it. It reports whether uuid named a GPU of the topology not retired
// before, and whether every GPU is retired now.
func (a *Allocator) Retire(uuid string) (retired, none bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.units {
		u := &a.units[i]
		if (u.gpu.UUID == uuid || u.gpu.Parent == uuid) && !u.retired {
			u.retired, u.held, retired = true, true, true
			if !u.gpu.MIG {
				a.nwhole--
			}
		}
	}
	return retired, a.inUse() == 0
}

// inUse counts the GPUs not retired.
func (a *Allocator) inUse() int {
	n := 0
	for _, u := range a.units {
		if !u.retired {
			n++
		}
	}
	return n
}

// Free returns the GPUs no run is on, in topology order, and the IDs of the
// CPUs no run holds or shares, ascending.
func (a *Allocator) Free() (gpus []GPU, cpus []int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range a.units {
		if u.runs == 0 {
			g := u.gpu
			g.LocalCPUs = slices.Clone(g.LocalCPUs)
			gpus = append(gpus, g)
		}
	}
	for i, c := range a.cpus {
		if a.isFree(i) {
			cpus = append(cpus, c.ID)
		}
	}
	return gpus, cpus
}
