package pack

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// Request is what one run needs. The zero Request is invalid: every run needs
// at least one CPU.
type Request struct {
	// GPUs is the number of GPUs (whole GPUs or MIG devices) per run; 0 for a
	// CPU-only run. A MIG device is never combined with other devices, so a
	// request for more than one GPU is served from whole GPUs only.
	GPUs int

	// RunsPerGPU lets up to RunsPerGPU runs share one GPU; 0 and 1 mean the
	// GPU is the run's alone. Values above 1 need GPUs == 1. Runs share a GPU
	// only with runs that asked for the same RunsPerGPU.
	RunsPerGPU int

	// CPUs is the number of CPUs per run, at least 1.
	CPUs int
}

// String returns the request in the form "gpus=1 runs-per-gpu=2 cpus=16",
// leaving out runs-per-gpu when the GPU is not shared.
func (r Request) String() string {
	var b strings.Builder
	b.WriteString("gpus=")
	b.WriteString(strconv.Itoa(r.GPUs))
	if r.RunsPerGPU > 1 {
		b.WriteString(" runs-per-gpu=")
		b.WriteString(strconv.Itoa(r.RunsPerGPU))
	}
	b.WriteString(" cpus=")
	b.WriteString(strconv.Itoa(r.CPUs))
	return b.String()
}

// Allocator hands out GPUs and CPUs of one node to runs as they start and
// takes them back as they end.
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
	free     []bool      // by index in cpus: no run holds the CPU
	nfree    int         // number of free CPUs
	cores    []core      // physical cores, by lowest CPU ID
	coreOf   []int       // index in cpus → index in cores
	nodes    []numaNode  // NUMA nodes that have CPUs, by ascending id
	units    []unit      // schedulable GPUs, by Index (stable)
	unitOf   map[string]int
	nwhole   int // number of whole (non-MIG) GPUs
}

// core is one physical core: its allowed hyperthreads. A restricted cpuset
// may leave a core with fewer threads than its siblings elsewhere.
type core struct {
	cpus   []int // indices into Allocator.cpus, ascending
	free   int   // how many of cpus no run holds
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

// unit is one schedulable GPU and its share state.
type unit struct {
	gpu      GPU
	distance []uint8 // by core index
	node     int     // index into Allocator.nodes; -1 when unknown
	socket   int     // socket of its near cores; -1 when unknown or several
	runs     int     // runs holding it
	share    int     // the RunsPerGPU of those runs; 0 when free
}

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

	a.cpus = slices.Clone(t.CPUs)
	slices.SortFunc(a.cpus, func(x, y CPU) int { return cmp.Compare(x.ID, y.ID) })
	a.cpuIndex = make(map[int]int, len(a.cpus))
	a.free = make([]bool, len(a.cpus))
	a.nfree = len(a.cpus)
	a.coreOf = make([]int, len(a.cpus))
	// Core ids repeat across sockets, so a core is keyed by (socket, core).
	// CPUs are visited by ascending ID, so cores come out ordered by their
	// lowest CPU ID, as kubelet numbers them.
	type coreKey struct{ socket, core int }
	coreIndex := make(map[coreKey]int)
	for i, c := range a.cpus {
		a.cpuIndex[c.ID] = i
		a.free[i] = true
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
	u := unit{gpu: g, node: -1, socket: -1}
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
	for n, node := range a.nodes {
		if anyNUMA && node.id == g.NUMA {
			u.node = n
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
// nil, an error wrapping [ErrNeverFits], or an error describing an invalid
// request, so callers can reject a request up front instead of waiting for
// resources that will never come.
func (a *Allocator) Check(r Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.check(r); err != nil {
		return fmt.Errorf("check %v: %w", r, err)
	}
	return nil
}

func (a *Allocator) check(r Request) error {
	if a.err != nil {
		return a.err
	}
	switch {
	case r.GPUs < 0:
		return fmt.Errorf("gpus %d: must not be negative", r.GPUs)
	case r.RunsPerGPU < 0:
		return fmt.Errorf("runs per gpu %d: must not be negative", r.RunsPerGPU)
	case r.CPUs < 1:
		return fmt.Errorf("cpus %d: a run needs at least 1 cpu", r.CPUs)
	case r.RunsPerGPU > 1 && r.GPUs != 1:
		return fmt.Errorf("runs per gpu %d: needs exactly 1 gpu per run, not %d", r.RunsPerGPU, r.GPUs)
	}
	return a.checkFits(r)
}

// checkFits reports whether r fits the empty node. It allows r.CPUs == 0,
// which NewPlan uses when runs share CPUs.
func (a *Allocator) checkFits(r Request) error {
	switch {
	case r.GPUs == 1 && len(a.units) == 0:
		return fmt.Errorf("node has no gpus: %w", ErrNeverFits)
	case r.GPUs > 1 && r.GPUs > a.nwhole:
		mig := ""
		if a.nwhole < len(a.units) {
			mig = " (a run gets at most one MIG device)"
		}
		return fmt.Errorf("node has %d whole gpus%s: %w", a.nwhole, mig, ErrNeverFits)
	case r.CPUs > len(a.cpus):
		return fmt.Errorf("node has %d cpus: %w", len(a.cpus), ErrNeverFits)
	}
	return nil
}

// Allocate takes the GPUs and CPUs for one run from the free pool.
//
// It returns an error wrapping [ErrBusy] when r does not fit what is free
// now but would fit the empty node, an error wrapping [ErrNeverFits] when it
// would not, and another error when r is invalid. On error nothing is taken.
//
// The returned Assignment lists CPUs in ascending order and GPUs in topology
// order (by Index). Give it back with Release when the run ends.
func (a *Allocator) Allocate(r Request) (Assignment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.check(r); err != nil {
		return Assignment{}, fmt.Errorf("allocate %v: %w", r, err)
	}
	as, err := a.allocate(r)
	if err != nil {
		return Assignment{}, fmt.Errorf("allocate %v: %w", r, err)
	}
	return as, nil
}

// allocate places r, which check has accepted (r.CPUs may be 0).
//
// GPUs are chosen first, scored by how many of the run's CPUs they let it
// take near them; CPUs are then taken nearest first, whole cores first.
func (a *Allocator) allocate(r Request) (Assignment, error) {
	share := max(r.RunsPerGPU, 1)
	if r.CPUs > a.nfree {
		return Assignment{}, fmt.Errorf("%d of %d cpus free: %w", a.nfree, len(a.cpus), ErrBusy)
	}
	var picked []int // unit indices
	var distance []uint8
	switch {
	case r.GPUs == 0:
		distance = a.pickNode(r.CPUs)
	case r.GPUs == 1:
		u := a.pickUnit(share, r.CPUs)
		if u < 0 {
			return Assignment{}, fmt.Errorf("no gpu free: %w", ErrBusy)
		}
		picked = []int{u}
		distance = a.units[u].distance
	default:
		picked, distance = a.pickUnits(r.GPUs, r.CPUs)
		if picked == nil {
			return Assignment{}, fmt.Errorf("fewer than %d whole gpus free: %w", r.GPUs, ErrBusy)
		}
	}

	as := Assignment{SharedGPUs: share > 1}
	for _, u := range picked {
		a.units[u].runs++
		a.units[u].share = share
		g := a.units[u].gpu
		g.LocalCPUs = slices.Clone(g.LocalCPUs)
		as.GPUs = append(as.GPUs, g)
	}
	for _, i := range a.takeCPUs(distance, r.CPUs) {
		as.CPUs = append(as.CPUs, a.cpus[i].ID)
	}
	slices.Sort(as.CPUs)
	as.NUMA = a.numaOf(as)
	return as, nil
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
	level     int  // multi-GPU runs: 0 one NUMA node, 1 one socket, 2 anywhere
	wholeNear int  // CPUs the run could take near, in whole free cores (capped at the request)
	allNear   int  // CPUs the run could take near (capped at the request)
	joins     bool // shares a GPU already in use, which keeps other GPUs whole
	nodeFree  int  // free GPUs on the candidate's NUMA node; fewer keeps nodes with many free GPUs for multi-GPU runs
	order     int
}

func (s score) better(t score) bool {
	switch {
	case s.level != t.level:
		return s.level < t.level
	case s.wholeNear != t.wholeNear:
		return s.wholeNear > t.wholeNear
	case s.allNear != t.allNear:
		return s.allNear > t.allNear
	case s.joins != t.joins:
		return s.joins
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

// freeUnitsByNode counts the free GPUs on each NUMA node.
func (a *Allocator) freeUnitsByNode() []int {
	n := make([]int, len(a.nodes))
	for _, u := range a.units {
		if u.node >= 0 && u.runs == 0 {
			n[u.node]++
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
		whole, all := a.nearCPUs(node.distance, cpus)
		s := score{wholeNear: whole, allNear: all, nodeFree: nodeFree[n], order: n}
		if best < 0 || s.better(bestScore) {
			best, bestScore = n, s
		}
	}
	if best < 0 {
		return nil // no CPUs at all; only reached with cpus == 0
	}
	return a.nodes[best].distance
}

// pickUnit chooses one GPU for a run that shares it with up to share-1
// others, or returns -1 when none is available.
func (a *Allocator) pickUnit(share, cpus int) int {
	nodeFree := a.freeUnitsByNode()
	best, bestScore := -1, score{}
	for i, u := range a.units {
		joins := false
		switch {
		case u.runs == 0:
		case share > 1 && u.share == share && u.runs < share:
			joins = true
		default:
			continue
		}
		whole, all := a.nearCPUs(u.distance, cpus)
		s := score{wholeNear: whole, allNear: all, joins: joins, order: i}
		if u.node >= 0 {
			s.nodeFree = nodeFree[u.node]
		}
		if best < 0 || s.better(bestScore) {
			best, bestScore = i, s
		}
	}
	return best
}

// pickUnits chooses n free whole GPUs for one run: from one NUMA node if
// possible, else from one socket, else the first free ones. It returns the
// GPUs and the distance of each core from the nearest of them, or nil when
// fewer than n whole GPUs are free.
func (a *Allocator) pickUnits(n, cpus int) ([]int, []uint8) {
	var free []int
	for i, u := range a.units {
		if !u.gpu.MIG && u.runs == 0 {
			free = append(free, i)
		}
	}
	if len(free) < n {
		return nil, nil
	}
	nodeFree := a.freeUnitsByNode()
	var best []int
	var bestDistance []uint8
	var bestScore score
	consider := func(level int, group []int) {
		if len(group) < n {
			return
		}
		group = group[:n]
		distance := slices.Clone(a.units[group[0]].distance)
		for _, u := range group[1:] {
			for j, d := range a.units[u].distance {
				distance[j] = min(distance[j], d)
			}
		}
		whole, all := a.nearCPUs(distance, cpus)
		s := score{level: level, wholeNear: whole, allNear: all, order: group[0]}
		if level == 0 {
			s.nodeFree = nodeFree[a.units[group[0]].node]
		}
		if best == nil || s.better(bestScore) {
			best, bestDistance, bestScore = group, distance, s
		}
	}
	for node := range a.nodes {
		consider(0, slices.DeleteFunc(slices.Clone(free), func(u int) bool { return a.units[u].node != node }))
	}
	var sockets []int
	for _, u := range free {
		if s := a.units[u].socket; s >= 0 && !slices.Contains(sockets, s) {
			sockets = append(sockets, s)
		}
	}
	for _, s := range sockets {
		consider(1, slices.DeleteFunc(slices.Clone(free), func(u int) bool { return a.units[u].socket != s }))
	}
	consider(2, free)
	return best, bestDistance
}

// takeCPUs takes n free CPUs, nearest first, and marks them taken. At each
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
			if a.free[i] {
				a.free[i] = false
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

// Release gives back the GPUs and CPUs of as, which must have been returned
// by Allocate on a and not released since. Release panics if as holds a CPU
// or GPU that a does not consider taken: that is a bug in the caller, and
// going on would hand the same CPU to two runs.
func (a *Allocator) Release(as Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := make(map[int]bool, len(as.CPUs))
	for _, id := range as.CPUs {
		i, ok := a.cpuIndex[id]
		if !ok || a.free[i] || seen[id] {
			panic(fmt.Sprintf("pack: release of cpu %d, which is not allocated", id))
		}
		seen[id] = true
	}
	held := make(map[int]int, len(as.GPUs))
	for _, g := range as.GPUs {
		u, ok := a.unitOf[g.UUID]
		if !ok || a.units[u].runs <= held[u] {
			panic(fmt.Sprintf("pack: release of gpu %s, which is not allocated", g.UUID))
		}
		held[u]++
	}
	for _, id := range as.CPUs {
		i := a.cpuIndex[id]
		a.free[i] = true
		a.cores[a.coreOf[i]].free++
		a.nfree++
	}
	for _, g := range as.GPUs {
		u := &a.units[a.unitOf[g.UUID]]
		u.runs--
		if u.runs == 0 {
			u.share = 0
		}
	}
}

// Free returns the GPUs no run holds, in topology order, and the IDs of the
// CPUs no run holds, ascending. A GPU shared by fewer runs than its
// RunsPerGPU is not free.
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
		if a.free[i] {
			cpus = append(cpus, c.ID)
		}
	}
	return gpus, cpus
}
