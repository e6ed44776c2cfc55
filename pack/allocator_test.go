package pack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// step is one call in an allocator sequence: Allocate(request), or, when
// release >= 0, Release of the assignment made by step release.
type step struct {
	request Request
	release int
	want    string // describe(assignment), or "busy", "never", "invalid"
}

func alloc(r Request, want string) step { return step{request: r, release: -1, want: want} }
func release(i int) step                { return step{release: i} }

func TestAllocatorSequence(t *testing.T) {
	// A GPU that only knows its LocalCPUs (socket 1), not its NUMA node.
	localOnly := Topology{
		CPUs: topoFourGPU.CPUs,
		GPUs: []GPU{{Index: 0, UUID: "GPU-local", NUMA: -1, LocalCPUs: numaCPUs(topoFourGPU.CPUs, 1)}},
	}
	oneGPU := Topology{
		CPUs: topoFourGPU.CPUs,
		GPUs: topoFourGPU.GPUs[:1],
	}
	tests := []struct {
		description string
		topo        Topology
		steps       []step
	}{
		{
			description: "heterogeneous sweep: 2-GPU, 1-GPU and CPU-only runs side by side",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{GPUs: 2, CPUs: 16}, "GPU-four-0,GPU-four-1 | 0-7,32-39 | numa 0"),
				alloc(Request{GPUs: 1, CPUs: 8}, "GPU-four-2 | 16-19,48-51 | numa 1"),
				alloc(Request{GPUs: 2, CPUs: 8}, "busy"),
				// CPU-only: NUMA node 1 still has a free GPU, so the run goes to node 0.
				alloc(Request{CPUs: 4}, "- | 8-9,40-41 | numa 0"),
				release(0),
				alloc(Request{GPUs: 2, CPUs: 4}, "GPU-four-0,GPU-four-1 | 0-1,32-33 | numa 0"),
				alloc(Request{GPUs: 1, CPUs: 8}, "GPU-four-3 | 20-23,52-55 | numa 1"),
				alloc(Request{GPUs: 1, CPUs: 1}, "busy"),
				alloc(Request{GPUs: 5, CPUs: 1}, "never"),
			},
		},
		{
			description: "a CPU-only run goes where no GPU is free, keeping CPUs near free GPUs for GPU runs",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{GPUs: 2, CPUs: 2}, "GPU-four-0,GPU-four-1 | 0,32 | numa 0"),
				alloc(Request{CPUs: 4}, "- | 1-2,33-34 | numa 0"),
				alloc(Request{GPUs: 1, CPUs: 4}, "GPU-four-2 | 16-17,48-49 | numa 1"),
			},
		},
		{
			description: "when the GPU's NUMA node is full, CPUs come from its socket, then anywhere",
			topo:        topoDGXA100,
			steps: []step{
				alloc(Request{CPUs: 30}, "- | 0-14,128-142 | numa 0"),
				alloc(Request{GPUs: 1, CPUs: 6}, "GPU-dgx-0 | 48-50,176-178 | numa 3"),
				release(0),
				alloc(Request{GPUs: 1, CPUs: 32}, "GPU-dgx-1 | 32-47,160-175 | numa 2"),
				alloc(Request{GPUs: 1, CPUs: 160}, "GPU-dgx-2 | 0-31,51-98,128-159,179-226 | numa -1"),
			},
		},
		{
			description: "odd CPU counts fill split cores before splitting whole ones",
			topo:        topoCPUOnly,
			steps: []step{
				alloc(Request{CPUs: 3}, "- | 0-1,16 | numa 0"),
				alloc(Request{CPUs: 1}, "- | 17 | numa 0"),
				alloc(Request{CPUs: 2}, "- | 2,18 | numa 0"),
			},
		},
		{
			description: "runs share a GPU only with runs of the same runs-per-gpu",
			topo:        oneGPU,
			steps: []step{
				alloc(Request{GPUs: 1, RunsPerGPU: 2, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0 shared-gpu"),
				alloc(Request{GPUs: 1, RunsPerGPU: 3, CPUs: 2}, "busy"),
				alloc(Request{GPUs: 1, CPUs: 2}, "busy"),
				alloc(Request{GPUs: 1, RunsPerGPU: 2, CPUs: 2}, "GPU-four-0 | 1,33 | numa 0 shared-gpu"),
				alloc(Request{GPUs: 1, RunsPerGPU: 2, CPUs: 2}, "busy"),
				release(0),
				release(3),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
			},
		},
		{
			description: "a GPU known only by its LocalCPUs gets CPUs from them",
			topo:        localOnly,
			steps: []step{
				alloc(Request{GPUs: 1, CPUs: 4}, "GPU-local | 16-17,48-49 | numa -1"),
			},
		},
		{
			description: "MIG devices: one per run, never two",
			topo:        topoMIG,
			steps: []step{
				alloc(Request{GPUs: 2, CPUs: 1}, "never"),
				alloc(Request{GPUs: 1, CPUs: 4}, "MIG-mig-0-0 | 0-1,32-33 | numa 0"),
				alloc(Request{GPUs: 1, RunsPerGPU: 2, CPUs: 4}, "MIG-mig-0-1 | 2-3,34-35 | numa 0 shared-gpu"),
			},
		},
		{
			description: "invalid requests",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{}, "invalid"),
				alloc(Request{GPUs: -1, CPUs: 1}, "invalid"),
				alloc(Request{RunsPerGPU: -1, CPUs: 1}, "invalid"),
				alloc(Request{GPUs: 2, RunsPerGPU: 2, CPUs: 1}, "invalid"),
				alloc(Request{RunsPerGPU: 2, CPUs: 1}, "invalid"),
				alloc(Request{CPUs: 65}, "never"),
			},
		},
		{
			description: "invalid topology",
			topo:        Topology{GPUs: []GPU{{UUID: "GPU-a"}, {UUID: "GPU-a"}}},
			steps: []step{
				alloc(Request{GPUs: 1, CPUs: 1}, "invalid"),
			},
		},
		{
			description: "zero topology: nothing ever fits",
			topo:        Topology{},
			steps: []step{
				alloc(Request{CPUs: 1}, "never"),
				alloc(Request{GPUs: 1, CPUs: 1}, "never"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			a := NewAllocator(tc.topo)
			made := make([]Assignment, len(tc.steps))
			for i, s := range tc.steps {
				if s.release >= 0 {
					a.Release(made[s.release])
					continue
				}
				as, err := a.Allocate(s.request)
				made[i] = as
				if got := outcome(as, err); got != s.want {
					t.Errorf("step %d: Allocate(%v) = %s (err %v), want %s", i, s.request, got, err, s.want)
				}
			}
		})
	}
}

// outcome classifies the result of Allocate like step.want.
func outcome(as Assignment, err error) string {
	switch {
	case err == nil:
		return describe(as)
	case errors.Is(err, ErrBusy) && errors.Is(err, ErrNeverFits):
		return "busy and never"
	case errors.Is(err, ErrBusy):
		return "busy"
	case errors.Is(err, ErrNeverFits):
		return "never"
	}
	return "invalid"
}

func TestAllocateErrorMessages(t *testing.T) {
	a := NewAllocator(topoFourGPU)
	for range 4 {
		if _, err := a.Allocate(Request{GPUs: 1, CPUs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		description string
		request     Request
		want        string
	}{
		{"busy", Request{GPUs: 1, CPUs: 1}, "allocate gpus=1 cpus=1: no gpu free: resources busy"},
		{"too many CPUs", Request{CPUs: 100}, "allocate gpus=0 cpus=100: node has 64 cpus: never fits this node"},
		{"too many GPUs", Request{GPUs: 5, CPUs: 1}, "allocate gpus=5 cpus=1: node has 4 whole gpus: never fits this node"},
		{"no CPUs", Request{GPUs: 1}, "allocate gpus=1 cpus=0: cpus 0: a run needs at least 1 cpu"},
		{"runs per GPU without one GPU", Request{GPUs: 2, RunsPerGPU: 2, CPUs: 1},
			"allocate gpus=2 runs-per-gpu=2 cpus=1: runs per gpu 2: needs exactly 1 gpu per run, not 2"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := a.Allocate(tc.request)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Allocate(%v) error = %v, want %q", tc.request, err, tc.want)
			}
		})
	}
	if err := a.Check(Request{GPUs: 1, CPUs: 1}); err != nil {
		t.Errorf("Check of a request that fits the empty node: %v", err)
	}
	if err := a.Check(Request{GPUs: 5, CPUs: 1}); !errors.Is(err, ErrNeverFits) {
		t.Errorf("Check(gpus=5) = %v, want ErrNeverFits", err)
	}
}

func TestReleasePanics(t *testing.T) {
	a := NewAllocator(topoFourGPU)
	as, err := a.Allocate(Request{GPUs: 1, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		description string
		as          Assignment
	}{
		{"CPU never allocated", Assignment{CPUs: []int{63}}},
		{"CPU not in the topology", Assignment{CPUs: []int{1000}}},
		{"GPU never allocated", Assignment{GPUs: []GPU{{UUID: "GPU-four-3"}}}},
		{"unknown GPU", Assignment{GPUs: []GPU{{UUID: "GPU-x"}}}},
		{"CPU listed twice", Assignment{CPUs: []int{as.CPUs[0], as.CPUs[0]}}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Release(%s) did not panic", describe(tc.as))
				}
			}()
			a.Release(tc.as)
		})
	}
	// The failed releases changed nothing: as can still be released, once.
	a.Release(as)
	defer func() {
		if recover() == nil {
			t.Error("second Release did not panic")
		}
	}()
	a.Release(as)
}

// TestAllocatorConcurrent runs workers that allocate and release at once;
// run it with -race.
func TestAllocatorConcurrent(t *testing.T) {
	a := NewAllocator(topoDGXA100)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := Request{GPUs: w % 2, CPUs: 4}
			for range 200 {
				as, err := a.Allocate(r)
				if errors.Is(err, ErrBusy) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				a.Release(as)
			}
		})
	}
	wg.Wait()
	gpus, cpus := a.Free()
	if len(gpus) != 8 || len(cpus) != 256 {
		t.Errorf("after all releases Free() = %d GPUs, %d CPUs; want 8, 256", len(gpus), len(cpus))
	}
}

func TestTopologyValidate(t *testing.T) {
	tests := []struct {
		description string
		topo        Topology
		want        string // "" for valid
	}{
		{"zero topology", Topology{}, ""},
		{"DGX A100", topoDGXA100, ""},
		{"MIG devices", topoMIG, ""},
		{"LocalCPUs outside the cpuset", topoSlurmCpuset, ""},
		{"negative CPU id", Topology{CPUs: []CPU{{ID: -1}}}, "topology: cpu -1: negative id"},
		{"CPU listed twice", Topology{CPUs: []CPU{{ID: 3}, {ID: 3}}}, "topology: cpu 3 listed twice"},
		{"empty UUID", Topology{GPUs: []GPU{{Index: 2}}}, "topology: gpu 2 (entry 0): empty uuid"},
		{"GPU listed twice", Topology{GPUs: []GPU{{UUID: "GPU-a"}, {UUID: "GPU-a"}}}, "topology: gpu GPU-a listed twice"},
		{
			"GPU listed whole and split",
			Topology{GPUs: []GPU{{UUID: "GPU-a"}, {UUID: "MIG-a", MIG: true, Parent: "GPU-a"}}},
			"topology: gpu GPU-a is listed whole and as the parent of MIG device MIG-a",
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			err := tc.topo.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestString(t *testing.T) {
	tests := []struct {
		description string
		request     Request
		want        string
	}{
		{"CPU-only", Request{CPUs: 4}, "gpus=0 cpus=4"},
		{"exclusive GPU", Request{GPUs: 1, RunsPerGPU: 1, CPUs: 16}, "gpus=1 cpus=16"},
		{"shared GPU", Request{GPUs: 1, RunsPerGPU: 2, CPUs: 16}, "gpus=1 runs-per-gpu=2 cpus=16"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := tc.request.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// BenchmarkAllocateRelease allocates and releases 10,000 runs of mixed
// requests on the DGX A100 node, releasing the oldest run whenever the next
// does not fit.
func BenchmarkAllocateRelease(b *testing.B) {
	requests := []Request{
		{GPUs: 1, CPUs: 16},
		{GPUs: 1, RunsPerGPU: 2, CPUs: 8},
		{GPUs: 2, CPUs: 32},
		{CPUs: 4},
	}
	for b.Loop() {
		a := NewAllocator(topoDGXA100)
		var running []Assignment
		for i := range 10_000 {
			r := requests[i%len(requests)]
			for {
				as, err := a.Allocate(r)
				if err == nil {
					running = append(running, as)
					break
				}
				if !errors.Is(err, ErrBusy) {
					b.Fatal(err)
				}
				a.Release(running[0])
				running = running[1:]
			}
		}
		for _, as := range running {
			a.Release(as)
		}
	}
}

// randomTopology returns a node of 1-2 sockets, 1-2 NUMA nodes per socket,
// 1-6 cores per NUMA node and 1-2 threads per core, sometimes restricted to
// a random cpuset, sometimes without NUMA information, listed in random
// order; and 0-6 GPUs, each on a random NUMA node (or unknown), with or
// without LocalCPUs, some split into MIG devices.
func randomTopology(r *rand.Rand) Topology {
	sockets, numaPerSocket := 1+r.IntN(2), 1+r.IntN(2)
	numaNodes := sockets * numaPerSocket
	full := cpusSMT(sockets, numaPerSocket, 1+r.IntN(6), 1+r.IntN(2))
	cpus := slices.Clone(full)
	if r.IntN(3) == 0 {
		cpus = slices.DeleteFunc(cpus, func(CPU) bool { return r.IntN(10) < 3 })
	}
	if r.IntN(10) == 0 {
		for i := range cpus {
			cpus[i].NUMA = -1
		}
	}
	r.Shuffle(len(cpus), func(i, j int) { cpus[i], cpus[j] = cpus[j], cpus[i] })
	topo := Topology{CPUs: cpus}
	for i := range r.IntN(7) {
		numa := r.IntN(numaNodes)
		if r.IntN(6) == 0 {
			numa = -1
		}
		var local []int // as NVML reports them: a whole NUMA node, cpuset or not
		if r.IntN(2) == 0 {
			local = numaCPUs(full, r.IntN(numaNodes))
		}
		g := GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), NUMA: numa, LocalCPUs: local}
		if r.IntN(4) > 0 {
			topo.GPUs = append(topo.GPUs, g)
			continue
		}
		for j := range 2 + r.IntN(6) {
			topo.GPUs = append(topo.GPUs, GPU{
				Index: i, UUID: fmt.Sprintf("MIG-%d-%d", i, j), NUMA: numa, LocalCPUs: local,
				MIG: true, Parent: g.UUID,
			})
		}
	}
	return topo
}

// randomRequest returns mostly valid requests of 0-3 GPUs, sometimes shared,
// and 1 to all CPUs, with a few that can never fit or are invalid.
func randomRequest(r *rand.Rand, topo Topology) Request {
	var req Request
	switch n := r.IntN(10); {
	case n < 3:
		req.GPUs = 0
	case n < 8:
		req.GPUs = 1
		if r.IntN(3) == 0 {
			req.RunsPerGPU = 2 + r.IntN(2)
		}
	default:
		req.GPUs = 2 + r.IntN(2)
	}
	req.CPUs = 1 + r.IntN(max(1, len(topo.CPUs)/3))
	switch r.IntN(30) {
	case 0:
		req.CPUs = len(topo.CPUs) + 1
	case 1:
		req.CPUs = 0
	case 2:
		req.RunsPerGPU = 2
	}
	return req
}

// TestAllocatorRandom drives allocators on random topologies with random
// interleaved Allocate and Release calls and checks, after every call, that
// the outcome matches an independent model of what fits and that no CPU or
// GPU is lost or handed out twice. Replaying a sequence gives the same
// placements.
func TestAllocatorRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 300 {
		topo := randomTopology(r)
		seed := r.Uint64()
		first := runRandomSequence(t, topo, seed)
		if t.Failed() {
			t.Fatalf("topology %d: %+v", i, topo)
		}
		if again := runRandomSequence(t, topo, seed); !slices.Equal(first, again) {
			t.Fatalf("topology %d: replay differs:\n%s\nthen:\n%s", i, strings.Join(first, "\n"), strings.Join(again, "\n"))
		}
	}
}

// runRandomSequence runs 150 random calls on a fresh allocator for topo and
// returns a transcript of the outcomes.
func runRandomSequence(t *testing.T, topo Topology, seed uint64) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0))
	a := NewAllocator(topo)
	var live []Assignment
	var requests []Request
	var transcript []string
	for range 150 {
		if len(live) > 0 && r.IntN(5) < 2 {
			i := r.IntN(len(live))
			a.Release(live[i])
			live = slices.Delete(live, i, i+1)
			requests = slices.Delete(requests, i, i+1)
			transcript = append(transcript, "release")
			continue
		}
		req := randomRequest(r, topo)
		as, err := a.Allocate(req)
		got := outcome(as, err)
		transcript = append(transcript, got)
		if want := modelOutcome(topo, live, requests, req); (got == "busy" || got == "never" || got == "invalid" || want != "fits") && got != want {
			t.Errorf("Allocate(%v) with %d live runs = %s (%v), want %s", req, len(live), got, err, want)
			return transcript
		}
		if err != nil {
			continue
		}
		checkAssignment(t, topo, live, requests, req, as)
		live = append(live, as)
		requests = append(requests, req)
		checkBookkeeping(t, a, live)
	}
	for _, as := range live {
		a.Release(as)
	}
	checkBookkeeping(t, a, nil)
	gpus, cpus := a.Free()
	if len(gpus) != len(topo.GPUs) || len(cpus) != len(topo.CPUs) {
		t.Errorf("after releasing everything Free() = %d GPUs, %d CPUs; want %d, %d",
			len(gpus), len(cpus), len(topo.GPUs), len(topo.CPUs))
	}
	for _, c := range topo.CPUs {
		if !slices.Contains(cpus, c.ID) {
			t.Errorf("CPU %d lost", c.ID)
		}
	}
	for _, g := range topo.GPUs {
		if !slices.ContainsFunc(gpus, func(h GPU) bool { return h.UUID == g.UUID }) {
			t.Errorf("GPU %s lost", g.UUID)
		}
	}
	return transcript
}

// modelOutcome says what Allocate(req) must do, given the live runs,
// without looking at the allocator: "invalid", "never", "busy" or "fits".
func modelOutcome(topo Topology, live []Assignment, requests []Request, req Request) string {
	if topo.Validate() != nil || req.GPUs < 0 || req.RunsPerGPU < 0 || req.CPUs < 1 || req.RunsPerGPU > 1 && req.GPUs != 1 {
		return "invalid"
	}
	whole := 0
	for _, g := range topo.GPUs {
		if !g.MIG {
			whole++
		}
	}
	if req.CPUs > len(topo.CPUs) || req.GPUs == 1 && len(topo.GPUs) == 0 || req.GPUs > 1 && req.GPUs > whole {
		return "never"
	}
	usedCPUs := 0
	users := map[string]int{}
	share := map[string]int{}
	for i, as := range live {
		usedCPUs += len(as.CPUs)
		for _, g := range as.GPUs {
			users[g.UUID]++
			share[g.UUID] = max(requests[i].RunsPerGPU, 1)
		}
	}
	if len(topo.CPUs)-usedCPUs < req.CPUs {
		return "busy"
	}
	k := max(req.RunsPerGPU, 1)
	available := 0
	for _, g := range topo.GPUs {
		switch {
		case req.GPUs > 1 && !g.MIG && users[g.UUID] == 0:
			available++
		case req.GPUs == 1 && (users[g.UUID] == 0 || k > 1 && share[g.UUID] == k && users[g.UUID] < k):
			available++
		}
	}
	if available < req.GPUs {
		return "busy"
	}
	return "fits"
}

// checkAssignment checks as, just returned for req, against the topology and
// the live runs: the right number of CPUs and GPUs, all from topo, no CPU
// held twice, a GPU shared only by runs of the same RunsPerGPU and by no
// more than that, MIG devices only alone. On a fresh allocator it also
// checks placement: whole cores when the count allows, near CPUs when enough
// are near, one NUMA node for a multi-GPU run when one has enough GPUs.
func checkAssignment(t *testing.T, topo Topology, live []Assignment, requests []Request, req Request, as Assignment) {
	t.Helper()
	if len(as.CPUs) != req.CPUs || len(as.GPUs) != req.GPUs {
		t.Errorf("Allocate(%v) = %s: wrong size", req, describe(as))
	}
	if !slices.IsSorted(as.CPUs) {
		t.Errorf("Allocate(%v): CPUs %v not ascending", req, as.CPUs)
	}
	held := map[int]bool{}
	users := map[string]int{}
	share := map[string]int{}
	for i, other := range live {
		for _, id := range other.CPUs {
			held[id] = true
		}
		for _, g := range other.GPUs {
			users[g.UUID]++
			share[g.UUID] = max(requests[i].RunsPerGPU, 1)
		}
	}
	numa := map[int]bool{}
	for _, id := range as.CPUs {
		c, ok := topoCPU(topo, id)
		if !ok || held[id] {
			t.Errorf("Allocate(%v) = %s: CPU %d not in the topology or held", req, describe(as), id)
		}
		numa[c.NUMA] = true
		held[id] = true
	}
	k := max(req.RunsPerGPU, 1)
	for _, g := range as.GPUs {
		if !slices.ContainsFunc(topo.GPUs, func(h GPU) bool { return h.UUID == g.UUID }) {
			t.Errorf("Allocate(%v): GPU %s not in the topology", req, g.UUID)
		}
		if users[g.UUID] > 0 && (k == 1 || share[g.UUID] != k || users[g.UUID] >= k) {
			t.Errorf("Allocate(%v) = %s: GPU %s already held by %d runs of %d per GPU", req, describe(as), g.UUID, users[g.UUID], share[g.UUID])
		}
		if g.MIG && req.GPUs > 1 {
			t.Errorf("Allocate(%v) = %s: MIG device in a multi-GPU run", req, describe(as))
		}
		numa[g.NUMA] = true
		users[g.UUID]++
	}
	if wantNUMA := -1; len(numa) == 1 {
		for n := range numa {
			wantNUMA = n
		}
		if as.NUMA != wantNUMA {
			t.Errorf("Allocate(%v) = %s: NUMA = %d, want %d", req, describe(as), as.NUMA, wantNUMA)
		}
	} else if as.NUMA != -1 {
		t.Errorf("Allocate(%v) = %s: NUMA = %d, want -1 (mixed)", req, describe(as), as.NUMA)
	}

	if len(live) > 0 {
		return
	}
	threads := map[[2]int]int{}
	for _, c := range topo.CPUs {
		threads[[2]int{c.Socket, c.Core}]++
	}
	uniform := true
	for _, n := range threads {
		for _, m := range threads {
			uniform = uniform && n == m
		}
	}
	perCore := len(topo.CPUs) / max(len(threads), 1)
	if uniform && req.CPUs%perCore == 0 {
		if split := splitCores(topo, as.CPUs); len(split) > 0 {
			t.Errorf("fresh Allocate(%v) = %s: split cores %v", req, describe(as), split)
		}
	}
	if req.GPUs == 1 {
		mostNear := 0
		for _, g := range topo.GPUs {
			mostNear = max(mostNear, len(nearCPUs(topo, g)))
		}
		near := nearCPUs(topo, as.GPUs[0])
		for _, id := range as.CPUs {
			if mostNear >= req.CPUs && !near[id] {
				t.Errorf("fresh Allocate(%v) = %s: CPU %d not near, though a GPU has %d near CPUs", req, describe(as), id, mostNear)
			}
		}
	}
	if req.GPUs > 1 {
		perNode := map[int]int{}
		for _, g := range topo.GPUs {
			if !g.MIG && g.NUMA >= 0 && slices.ContainsFunc(topo.CPUs, func(c CPU) bool { return c.NUMA == g.NUMA }) {
				perNode[g.NUMA]++
			}
		}
		if slices.Max(append(slices.Collect(mapValues(perNode)), 0)) >= req.GPUs {
			for _, g := range as.GPUs[1:] {
				if g.NUMA != as.GPUs[0].NUMA {
					t.Errorf("fresh Allocate(%v) = %s: GPUs on several NUMA nodes, though one has %d", req, describe(as), req.GPUs)
				}
			}
		}
	}
}

func mapValues(m map[int]int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// checkBookkeeping checks the allocator's counters against its free map and
// the live runs: free CPUs per core and in all, runs per GPU, and share mode
// cleared on free GPUs.
func checkBookkeeping(t *testing.T, a *Allocator, live []Assignment) {
	t.Helper()
	nfree := 0
	for j, c := range a.cores {
		free := 0
		for _, i := range c.cpus {
			if a.free[i] {
				free++
			}
		}
		if free != c.free {
			t.Errorf("core %d: free = %d, counted %d", j, c.free, free)
		}
		nfree += free
	}
	if nfree != a.nfree {
		t.Errorf("nfree = %d, counted %d", a.nfree, nfree)
	}
	runs := map[string]int{}
	for _, as := range live {
		for _, g := range as.GPUs {
			runs[g.UUID]++
		}
	}
	for _, u := range a.units {
		if u.runs != runs[u.gpu.UUID] || (u.runs == 0) != (u.share == 0) {
			t.Errorf("gpu %s: runs = %d, share = %d; live runs %d", u.gpu.UUID, u.runs, u.share, runs[u.gpu.UUID])
		}
	}
}

func TestZeroAllocator(t *testing.T) {
	var a Allocator
	if _, err := a.Allocate(Request{CPUs: 1}); !errors.Is(err, ErrNeverFits) {
		t.Errorf("zero Allocator: Allocate = %v, want ErrNeverFits", err)
	}
	a.Release(Assignment{}) // nothing held, nothing to give back
	if gpus, cpus := a.Free(); gpus != nil || cpus != nil {
		t.Errorf("zero Allocator: Free() = %v, %v; want nothing", gpus, cpus)
	}
}
