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
// release >= 0, Release of the assignment made by step release, or, when
// set, set (a setting such as Spread).
type step struct {
	request Request
	release int
	want    string // describe(assignment), or "busy", "never", "invalid"
	set     func(*Allocator)
}

func alloc(r Request, want string) step { return step{request: r, release: -1, want: want} }
func release(i int) step                { return step{release: i} }
func setting(f func(*Allocator)) step   { return step{release: -1, set: f} }

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
			description: "a 2-GPU run waits for two GPUs of one NUMA node rather than take two that are apart",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-1 | 1,33 | numa 0"),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-2 | 16,48 | numa 1"),
				// GPUs 0 and 3 are free, on two NUMA nodes.
				release(0),
				alloc(Request{GPUs: 2, CPUs: 2}, "busy"),
				release(1),
				alloc(Request{GPUs: 2, CPUs: 2}, "GPU-four-0,GPU-four-1 | 0,32 | numa 0"),
			},
		},
		{
			description: "one GPU per NUMA node: a 2-GPU run gets two GPUs of one socket",
			topo:        topoDGXA100,
			steps: []step{
				// GPUs 0-3 are on socket 0 (NUMA nodes 3, 2, 1, 0), 4-7 on socket 1.
				alloc(Request{GPUs: 2, CPUs: 4}, "GPU-dgx-0,GPU-dgx-1 | 32-33,160-161 | numa -1"),
				alloc(Request{GPUs: 4, CPUs: 4}, "GPU-dgx-4,GPU-dgx-5,GPU-dgx-6,GPU-dgx-7 | 64-65,192-193 | numa -1"),
				alloc(Request{GPUs: 2, CPUs: 4}, "GPU-dgx-2,GPU-dgx-3 | 0-1,128-129 | numa -1"),
				alloc(Request{GPUs: 1, CPUs: 4}, "busy"),
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
			description: "shares of one GPU add up to at most one GPU: 0.6 and 0.6 never share",
			topo:        oneGPU,
			steps: []step{
				alloc(Request{GPUShare: 600, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 600, CPUs: 2}, "busy"),
				alloc(Request{GPUs: 1, CPUs: 2}, "busy"),
				alloc(Request{GPUShare: 400, CPUs: 2}, "GPU-four-0 | 1,33 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 1, CPUs: 2}, "busy"),
				release(0),
				alloc(Request{GPUShare: 600, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0 shared-gpu"),
				release(3),
				release(6),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
			},
		},
		{
			description: "thirds: three runs of 1/3 fill one GPU",
			topo:        oneGPU,
			steps: []step{
				alloc(Request{GPUShare: 333, CPUs: 1}, "GPU-four-0 | 0 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 333, CPUs: 1}, "GPU-four-0 | 32 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 333, CPUs: 1}, "GPU-four-0 | 1 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 333, CPUs: 1}, "busy"),
			},
		},
		{
			description: "mixed 2-GPU and quarter-GPU runs: quarters fill one GPU before taking another, keeping a NUMA node whole",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{GPUShare: 250, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0 shared-gpu"),
				alloc(Request{GPUs: 2, CPUs: 4}, "GPU-four-2,GPU-four-3 | 16-17,48-49 | numa 1"),
				alloc(Request{GPUShare: 250, CPUs: 2}, "GPU-four-0 | 1,33 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 2}, "GPU-four-0 | 2,34 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 2}, "GPU-four-0 | 3,35 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 2}, "GPU-four-1 | 4,36 | numa 0 shared-gpu"),
				alloc(Request{GPUs: 2, CPUs: 4}, "busy"),
				alloc(Request{GPUs: 1, CPUs: 4}, "busy"),
				release(1),
				alloc(Request{GPUs: 2, CPUs: 4}, "GPU-four-2,GPU-four-3 | 16-17,48-49 | numa 1"),
			},
		},
		{
			description: "runs with GPUs of their own never join a shared GPU, and sharers never join an owned one",
			topo:        oneGPU,
			steps: []step{
				alloc(Request{GPUs: 1, CPUs: 1}, "GPU-four-0 | 0 | numa 0"),
				alloc(Request{GPUShare: 100, CPUs: 1}, "busy"),
				alloc(Request{GPUMem: 1 << 30, CPUs: 1}, "never"), // no GPU memory known
				release(0),
				alloc(Request{GPUShare: 100, CPUs: 1}, "GPU-four-0 | 0 | numa 0 shared-gpu"),
				alloc(Request{GPUs: 1, CPUs: 1}, "busy"),
			},
		},
		{
			description: "GPU memory: runs share a GPU while their gpu_mem fits its memory less the headroom",
			topo:        withGPUMemory(oneGPU, 40<<30), // 38 GiB usable: 40 GiB less 2 GiB (5%)
			steps: []step{
				alloc(Request{GPUMem: 12 << 30, CPUs: 1}, "GPU-four-0 | 0 | numa 0 shared-gpu"),
				alloc(Request{GPUMem: 12 << 30, CPUs: 1}, "GPU-four-0 | 32 | numa 0 shared-gpu"),
				alloc(Request{GPUMem: 12 << 30, CPUs: 1}, "GPU-four-0 | 1 | numa 0 shared-gpu"),
				alloc(Request{GPUMem: 12 << 30, CPUs: 1}, "busy"),
				alloc(Request{GPUMem: 2 << 30, CPUs: 1}, "GPU-four-0 | 33 | numa 0 shared-gpu"),
				alloc(Request{GPUMem: 1, CPUs: 1}, "busy"),
				alloc(Request{GPUMem: 39 << 30, CPUs: 1}, "never"),
				alloc(Request{GPUs: 1, GPUMem: 40 << 30, CPUs: 1}, "busy"),
				alloc(Request{GPUs: 1, GPUMem: 41 << 30, CPUs: 1}, "never"),
			},
		},
		{
			description: "a share of a GPU claims that share of its memory",
			topo:        withGPUMemory(oneGPU, 40<<30),
			steps: []step{
				alloc(Request{GPUShare: 500, CPUs: 1}, "GPU-four-0 | 0 | numa 0 shared-gpu"),
				alloc(Request{GPUMem: 20 << 30, CPUs: 1}, "busy"),
				alloc(Request{GPUMem: 19 << 30, CPUs: 1}, "GPU-four-0 | 32 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 100, CPUs: 1}, "busy"), // memory full, shares not
			},
		},
		{
			description: "host memory: runs start while their mem fits",
			topo:        Topology{CPUs: topoCPUOnly.CPUs, Memory: 64 << 30},
			steps: []step{
				alloc(Request{CPUs: 1, Mem: 40 << 30}, "- | 0 | numa 0"),
				alloc(Request{CPUs: 1, Mem: 30 << 30}, "busy"),
				alloc(Request{CPUs: 1, Mem: 24 << 30}, "- | 16 | numa 0"),
				alloc(Request{CPUs: 1}, "- | 1 | numa 0"),
				alloc(Request{CPUs: 1, Mem: 65 << 30}, "never"),
				release(0),
				alloc(Request{CPUs: 1, Mem: 30 << 30}, "- | 0 | numa 0"),
			},
		},
		{
			description: "without the node's memory no run can claim memory",
			topo:        topoCPUOnly,
			steps: []step{
				alloc(Request{CPUs: 1, Mem: 1}, "never"),
			},
		},
		{
			description: "shared CPUs: the least loaded CPU no run holds",
			topo:        Topology{CPUs: cpusSMT(1, 1, 2, 1)}, // CPUs 0 and 1
			steps: []step{
				alloc(Request{CPUs: 0}, "- | 0 | numa 0 shared-cpu"),
				alloc(Request{CPUs: 0}, "- | 1 | numa 0 shared-cpu"),
				alloc(Request{CPUs: 0}, "- | 0 | numa 0 shared-cpu"),
				alloc(Request{CPUs: 1}, "busy"), // no CPU is free of sharers
				release(1),
				alloc(Request{CPUs: 1}, "- | 1 | numa 0"),
				alloc(Request{CPUs: 0}, "- | 0 | numa 0 shared-cpu"),
				release(0),
				release(2),
				release(6),
				alloc(Request{CPUs: 0}, "- | 0 | numa 0 shared-cpu"),
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
				alloc(Request{GPUShare: 500, CPUs: 4}, "MIG-mig-0-1 | 2-3,34-35 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 500, CPUs: 4}, "MIG-mig-0-1 | 4-5,36-37 | numa 0 shared-gpu"),
			},
		},
		{
			description: "invalid requests",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{CPUs: -1}, "invalid"),
				alloc(Request{GPUs: -1, CPUs: 1}, "invalid"),
				alloc(Request{GPUShare: -1, CPUs: 1}, "invalid"),
				alloc(Request{GPUShare: 1001, CPUs: 1}, "invalid"),
				alloc(Request{GPUs: 2, GPUShare: 500, CPUs: 1}, "invalid"),
				alloc(Request{GPUs: 1, AutoGPUMem: true, CPUs: 1}, "invalid"),
				alloc(Request{AutoGPUMem: true, CPUs: 1}, "never"), // no GPU memory known: auto cannot share
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
			description: "without Spread, a GPU freed is the first choice again",
			topo:        topoFourGPU,
			steps: []step{
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
				release(0),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
			},
		},
		{
			description: "Spread: runs that each end before the next starts land on distinct GPUs, then the least used again",
			topo:        topoFourGPU,
			steps: []step{
				setting(func(a *Allocator) { a.Spread(true) }),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
				release(1),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-1 | 0,32 | numa 0"),
				release(3),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-2 | 16,48 | numa 1"),
				release(5),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-3 | 16,48 | numa 1"),
				release(7),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-0 | 0,32 | numa 0"),
				setting(func(a *Allocator) { a.Spread(false) }),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-1 | 1,33 | numa 0"),
				release(11),
				alloc(Request{GPUs: 1, CPUs: 2}, "GPU-four-1 | 1,33 | numa 0"),
			},
		},
		{
			description: "Spread: quarter-GPU runs go to GPUs of their own before they share one",
			topo:        topoFourGPU,
			steps: []step{
				setting(func(a *Allocator) { a.Spread(true) }),
				alloc(Request{GPUShare: 250, CPUs: 1}, "GPU-four-0 | 0 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 1}, "GPU-four-1 | 32 | numa 0 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 1}, "GPU-four-2 | 16 | numa 1 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 1}, "GPU-four-3 | 48 | numa 1 shared-gpu"),
				alloc(Request{GPUShare: 250, CPUs: 1}, "GPU-four-0 | 1 | numa 0 shared-gpu"),
			},
		},
		{
			description: "Spread keeps a 2-GPU run's GPUs on one NUMA node, and prefers the node used least",
			topo:        topoFourGPU,
			steps: []step{
				setting(func(a *Allocator) { a.Spread(true) }),
				alloc(Request{GPUs: 2, CPUs: 2}, "GPU-four-0,GPU-four-1 | 0,32 | numa 0"),
				release(1),
				alloc(Request{GPUs: 2, CPUs: 2}, "GPU-four-2,GPU-four-3 | 16,48 | numa 1"),
			},
		},
		{
			description: "LimitBare: runs that hold nothing of their own are capped; others are not",
			topo:        topoFourGPU,
			steps: []step{
				setting(func(a *Allocator) { a.LimitBare(2) }),
				alloc(Request{}, "- | 0 | numa 0 shared-cpu"),
				alloc(Request{}, "- | 1 | numa 0 shared-cpu"),
				alloc(Request{}, "busy"),
				alloc(Request{GPUShare: 250}, "GPU-four-0 | 2 | numa 0 shared-gpu shared-cpu"),
				alloc(Request{CPUs: 1}, "- | 32 | numa 0"),
				release(1),
				alloc(Request{}, "- | 0 | numa 0 shared-cpu"),
				setting(func(a *Allocator) { a.LimitBare(0) }),
				alloc(Request{}, "- | 3 | numa 0 shared-cpu"),
			},
		},
		{
			description: "zero topology: nothing ever fits",
			topo:        Topology{},
			steps: []step{
				alloc(Request{}, "never"),
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
				if s.set != nil {
					s.set(a)
					continue
				}
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
		{"too many CPUs", Request{CPUs: 100}, "allocate gpus=0 cpus=100: the node has 64 CPUs: never fits this node"},
		{"too many GPUs", Request{GPUs: 5, CPUs: 1}, "allocate gpus=5 cpus=1: the node has 4 whole GPUs: never fits this node"},
		{"GPU memory unknown", Request{GPUMem: 1 << 30}, "allocate gpu_mem=1GiB cpus=0: the GPUs' memory is not known (no NVML), so gpu_mem cannot be granted: never fits this node"},
		{"host memory unknown", Request{Mem: 1 << 30}, "allocate gpus=0 cpus=0 mem=1GiB: the node's memory is not known, so mem cannot be granted: never fits this node"},
		{"own GPUs and a share", Request{GPUs: 2, GPUShare: 500, CPUs: 1},
			"allocate gpus=2 cpus=1: gpus=2 and a share of one GPU exclude each other"},
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
	big := NewAllocator(withGPUMemory(topoFourGPU, 40<<30))
	for _, tc := range []struct {
		request Request
		want    string
	}{
		{Request{GPUMem: 39 << 30}, "gpu_mem=39GiB cpus=0: a run sharing a GPU may claim at most 38GiB of its memory (40GiB less 2GiB headroom): never fits this node"},
		{Request{GPUs: 2, GPUMem: 80 << 30}, "gpus=2 gpu_mem=80GiB cpus=0: the node has 0 GPUs with 80GiB: never fits this node"},
		{Request{AutoGPUMem: true, CPUs: 2}, ""},
	} {
		err := big.Check(tc.request)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("Check(%v) = %v, want %q", tc.request, err, tc.want)
		}
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
		{"CPU never allocated", Assignment{CPUs: []int{63}, Request: Request{CPUs: 1}}},
		{"CPU not in the topology", Assignment{CPUs: []int{1000}, Request: Request{CPUs: 1}}},
		{"CPU never shared", Assignment{CPUs: []int{63}}},
		{"GPU never allocated", Assignment{GPUs: []GPU{{UUID: "GPU-four-3"}}, Request: Request{GPUs: 1}}},
		{"owned GPU released as shared", Assignment{GPUs: as.GPUs, Request: Request{GPUShare: 100}}},
		{"unknown GPU", Assignment{GPUs: []GPU{{UUID: "GPU-x"}}, Request: Request{GPUs: 1}}},
		{"CPU listed twice", Assignment{CPUs: []int{as.CPUs[0], as.CPUs[0]}, Request: Request{CPUs: 2}}},
		{"memory never allocated", Assignment{Request: Request{Mem: 1}}},
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

// BenchmarkAllocateRelease allocates and releases 10,000 runs of mixed
// requests on the DGX A100 node, releasing the oldest run whenever the next
// does not fit.
func BenchmarkAllocateRelease(b *testing.B) {
	requests := []Request{
		{GPUs: 1, CPUs: 16},
		{GPUShare: 500, CPUs: 8},
		{GPUShare: 250, CPUs: 0},
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
	if r.IntN(2) == 0 {
		sizes := []uint64{16 << 30, 40 << 30, 80 << 30}
		for i := range topo.GPUs {
			topo.GPUs[i].MemoryBytes = sizes[r.IntN(len(sizes))]
		}
	}
	if r.IntN(2) == 0 {
		topo.Memory = uint64(8+r.IntN(120)) << 30
	}
	return topo
}

// randomRequest returns mostly valid requests: CPU-only, 1 GPU, a share
// of a GPU by fraction or by memory, or 2-3 GPUs; 1 to a third of the CPUs
// or a shared one; sometimes host memory; with a few that can never fit or
// are invalid.
func randomRequest(r *rand.Rand, topo Topology) Request {
	var req Request
	switch n := r.IntN(10); {
	case n < 3:
	case n < 5:
		req.GPUs = 1
	case n < 8:
		switch r.IntN(3) {
		case 0:
			req.GPUShare = []int{250, 333, 500, 600}[r.IntN(4)]
		case 1:
			req.GPUMem = []uint64{4 << 30, 8 << 30, 12 << 30, 20 << 30}[r.IntN(4)]
		default:
			req.GPUShare = []int{250, 500}[r.IntN(2)]
			req.GPUMem = []uint64{4 << 30, 12 << 30}[r.IntN(2)]
		}
	default:
		req.GPUs = 2 + r.IntN(2)
	}
	req.CPUs = 1 + r.IntN(max(1, len(topo.CPUs)/3))
	if r.IntN(8) == 0 {
		req.CPUs = 0
	}
	if r.IntN(4) == 0 {
		req.Mem = []uint64{1 << 30, 4 << 30, 16 << 30}[r.IntN(3)]
	}
	switch r.IntN(30) {
	case 0:
		req.CPUs = len(topo.CPUs) + 1
	case 1:
		req.CPUs = -1
	case 2:
		req.GPUs, req.GPUShare = 2, 500
	case 3:
		req.GPUs, req.GPUMem = 1, 30<<30
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
	var transcript []string
	for range 150 {
		if len(live) > 0 && r.IntN(5) < 2 {
			i := r.IntN(len(live))
			a.Release(live[i])
			live = slices.Delete(live, i, i+1)
			transcript = append(transcript, "release")
			continue
		}
		req := randomRequest(r, topo)
		as, err := a.Allocate(req)
		got := outcome(as, err)
		transcript = append(transcript, got)
		if want := modelOutcome(topo, live, req); (got == "busy" || got == "never" || got == "invalid" || want != "fits") && got != want {
			t.Errorf("Allocate(%v) with %d live runs = %s (%v), want %s", req, len(live), got, err, want)
			return transcript
		}
		if err != nil {
			continue
		}
		checkAssignment(t, topo, live, req, as)
		live = append(live, as)
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

// unitState is what the live runs claim of one GPU, in the model.
type unitState struct {
	runs  int
	own   bool
	share int
	mem   uint64
}

// modelUnits works out each GPU's state from the live runs, independently
// of the allocator.
func modelUnits(topo Topology, live []Assignment) map[string]*unitState {
	units := map[string]*unitState{}
	for _, g := range topo.GPUs {
		units[g.UUID] = &unitState{}
	}
	for _, as := range live {
		r := as.Request
		for _, g := range as.GPUs {
			u := units[g.UUID]
			u.runs++
			if r.GPUs > 0 {
				u.own = true
				continue
			}
			u.share += r.GPUShare
			u.mem += modelClaim(topoGPU(topo, g.UUID), r)
		}
	}
	return units
}

// modelUsable is the GPU memory runs sharing g may claim.
func modelUsable(g GPU) uint64 {
	headroom := max(g.MemoryBytes/20, 256<<20)
	if g.MemoryBytes <= headroom {
		return 0
	}
	return g.MemoryBytes - headroom
}

// modelClaim is the GPU memory a run sharing g claims.
func modelClaim(g GPU, r Request) uint64 {
	if r.GPUMem > 0 {
		return r.GPUMem
	}
	return modelUsable(g) / 1000 * uint64(r.GPUShare)
}

func topoGPU(topo Topology, uuid string) GPU {
	i := slices.IndexFunc(topo.GPUs, func(g GPU) bool { return g.UUID == uuid })
	return topo.GPUs[i]
}

// modelOutcome says what Allocate(req) must do, given the live runs,
// without looking at the allocator: "invalid", "never", "busy" or "fits".
func modelOutcome(topo Topology, live []Assignment, req Request) string {
	sharer := req.GPUs == 0 && (req.GPUShare > 0 || req.GPUMem > 0)
	if topo.Validate() != nil || req.GPUs < 0 || req.GPUShare < 0 || req.GPUShare > 1000 || req.CPUs < 0 ||
		req.GPUs > 0 && req.GPUShare > 0 {
		return "invalid"
	}
	whole, fitMem := 0, 0
	for _, g := range topo.GPUs {
		if !g.MIG {
			whole++
		}
		switch {
		case sharer && modelUsable(g) >= req.GPUMem:
			fitMem++
		case !sharer && g.MemoryBytes >= req.GPUMem && (req.GPUs == 1 || !g.MIG):
			fitMem++
		}
	}
	usesGPU := req.GPUs > 0 || sharer
	if len(topo.CPUs) == 0 || req.CPUs > len(topo.CPUs) || usesGPU && len(topo.GPUs) == 0 || req.GPUs > 1 && req.GPUs > whole ||
		req.Mem > topo.Memory || req.GPUMem > 0 && fitMem < max(req.GPUs, 1) {
		return "never"
	}
	var memUsed uint64
	held, shared := map[int]bool{}, map[int]bool{}
	for _, as := range live {
		memUsed += as.Request.Mem
		for _, id := range as.CPUs {
			if as.Request.CPUs == 0 {
				shared[id] = true
			} else {
				held[id] = true
			}
		}
	}
	if memUsed+req.Mem > topo.Memory {
		return "busy"
	}
	freeCPUs, unheld := 0, 0
	for _, c := range topo.CPUs {
		if !held[c.ID] {
			unheld++
			if !shared[c.ID] {
				freeCPUs++
			}
		}
	}
	if req.CPUs > freeCPUs || req.CPUs == 0 && unheld == 0 {
		return "busy"
	}
	units := modelUnits(topo, live)
	available := 0
	for _, g := range topo.GPUs {
		u := units[g.UUID]
		switch {
		case sharer:
			claim := modelClaim(g, req)
			usable := modelUsable(g)
			memOK := usable == 0 && req.GPUMem == 0 || u.mem+claim <= usable
			if !u.own && u.share+req.GPUShare <= 1000 && memOK {
				available++
			}
		case req.GPUs == 1 && u.runs == 0 && g.MemoryBytes >= req.GPUMem:
			available++
		}
	}
	if req.GPUs > 1 && !modelCloseGPUsFree(topo, units, req) || req.GPUs <= 1 && available < 1 && usesGPU {
		return "busy"
	}
	return "fits"
}

// modelCloseGPUsFree says whether req.GPUs whole GPUs are free as close
// together as the node allows: on one NUMA node when some NUMA node has
// that many GPUs at all, else on one socket when some socket has, else
// anywhere.
func modelCloseGPUsFree(topo Topology, units map[string]*unitState, req Request) bool {
	var eligible []GPU
	for _, g := range topo.GPUs {
		if !g.MIG && g.MemoryBytes >= req.GPUMem {
			eligible = append(eligible, g)
		}
	}
	for _, groupOf := range []func(GPU) int{
		func(g GPU) int { return g.NUMA },
		func(g GPU) int { return modelSocket(topo, g) },
	} {
		all, free := map[int]int{}, map[int]int{}
		for _, g := range eligible {
			if k := groupOf(g); k >= 0 {
				all[k]++
				if units[g.UUID].runs == 0 {
					free[k]++
				}
			}
		}
		tight := false
		for k, n := range all {
			if n >= req.GPUs {
				tight = true
				if free[k] >= req.GPUs {
					return true
				}
			}
		}
		if tight {
			return false
		}
	}
	free := 0
	for _, g := range eligible {
		if units[g.UUID].runs == 0 {
			free++
		}
	}
	return free >= req.GPUs
}

// modelSocket is the socket of the CPUs near g (on its NUMA node, else in
// its LocalCPUs), or -1 when they span sockets or are unknown.
func modelSocket(topo Topology, g GPU) int {
	var near []CPU
	for _, c := range topo.CPUs {
		if g.NUMA >= 0 && c.NUMA == g.NUMA {
			near = append(near, c)
		}
	}
	if len(near) == 0 {
		for _, c := range topo.CPUs {
			if slices.Contains(g.LocalCPUs, c.ID) {
				near = append(near, c)
			}
		}
	}
	socket := -1
	for i, c := range near {
		if i > 0 && c.Socket != socket {
			return -1
		}
		socket = c.Socket
	}
	return socket
}

// checkAssignment checks as, just returned for req, against the topology and
// the live runs: the right number of CPUs and GPUs, all from topo, no CPU
// held twice or held and shared, a GPU that a run has to itself shared with
// no other, shares and memory of a shared GPU within it, MIG devices only
// alone. On a fresh allocator it also checks placement: whole cores when
// the count allows, near CPUs when enough are near, one NUMA node for a
// multi-GPU run when one has enough GPUs.
func checkAssignment(t *testing.T, topo Topology, live []Assignment, req Request, as Assignment) {
	t.Helper()
	sharer := req.GPUs == 0 && (req.GPUShare > 0 || req.GPUMem > 0)
	wantGPUs := req.GPUs
	if sharer {
		wantGPUs = 1
	}
	if len(as.CPUs) != max(req.CPUs, 1) || len(as.GPUs) != wantGPUs || as.Request != req ||
		as.SharedCPUs != (req.CPUs == 0) || as.SharedGPUs != sharer {
		t.Errorf("Allocate(%v) = %s: wrong size or flags", req, describe(as))
	}
	if !slices.IsSorted(as.CPUs) {
		t.Errorf("Allocate(%v): CPUs %v not ascending", req, as.CPUs)
	}
	held, shared := map[int]bool{}, map[int]bool{}
	for _, other := range live {
		for _, id := range other.CPUs {
			if other.Request.CPUs == 0 {
				shared[id] = true
			} else {
				held[id] = true
			}
		}
	}
	units := modelUnits(topo, append(slices.Clone(live), as))
	numa := map[int]bool{}
	for _, id := range as.CPUs {
		c, ok := topoCPU(topo, id)
		if !ok || held[id] || req.CPUs > 0 && shared[id] {
			t.Errorf("Allocate(%v) = %s: CPU %d not in the topology, held or shared", req, describe(as), id)
		}
		numa[c.NUMA] = true
		held[id] = true
	}
	for _, g := range as.GPUs {
		if !slices.ContainsFunc(topo.GPUs, func(h GPU) bool { return h.UUID == g.UUID }) {
			t.Fatalf("Allocate(%v): GPU %s not in the topology", req, g.UUID)
		}
		u := units[g.UUID]
		switch {
		case u.own && u.runs > 1:
			t.Errorf("Allocate(%v) = %s: GPU %s owned by one run and used by %d", req, describe(as), g.UUID, u.runs)
		case u.share > 1000:
			t.Errorf("Allocate(%v) = %s: GPU %s shared by %d thousandths", req, describe(as), g.UUID, u.share)
		case u.mem > 0 && u.mem > modelUsable(topoGPU(topo, g.UUID)):
			t.Errorf("Allocate(%v) = %s: GPU %s: %d bytes claimed of %d", req, describe(as), g.UUID, u.mem, modelUsable(topoGPU(topo, g.UUID)))
		}
		if g.MIG && req.GPUs > 1 {
			t.Errorf("Allocate(%v) = %s: MIG device in a multi-GPU run", req, describe(as))
		}
		numa[g.NUMA] = true
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
	if uniform && req.CPUs > 0 && req.CPUs%perCore == 0 {
		if split := splitCores(topo, as.CPUs); len(split) > 0 {
			t.Errorf("fresh Allocate(%v) = %s: split cores %v", req, describe(as), split)
		}
	}
	if len(as.GPUs) == 1 {
		mostNear := 0
		for _, g := range topo.GPUs {
			if sharer && modelUsable(g) >= req.GPUMem || !sharer && g.MemoryBytes >= req.GPUMem {
				mostNear = max(mostNear, len(nearCPUs(topo, g)))
			}
		}
		near := nearCPUs(topo, as.GPUs[0])
		for _, id := range as.CPUs {
			if mostNear >= req.CPUs && req.CPUs > 0 && !near[id] {
				t.Errorf("fresh Allocate(%v) = %s: CPU %d not near, though a GPU has %d near CPUs", req, describe(as), id, mostNear)
			}
		}
	}
	if req.GPUs > 1 {
		perNode := map[int]int{}
		for _, g := range topo.GPUs {
			if !g.MIG && g.NUMA >= 0 && g.MemoryBytes >= req.GPUMem && slices.ContainsFunc(topo.CPUs, func(c CPU) bool { return c.NUMA == g.NUMA }) {
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

// checkBookkeeping checks the allocator's counters against its CPU maps
// and the live runs: free CPUs per core and in all, sharers per CPU, runs,
// shares and memory per GPU, and host memory.
func checkBookkeeping(t *testing.T, a *Allocator, live []Assignment) {
	t.Helper()
	nfree := 0
	for j, c := range a.cores {
		free := 0
		for _, i := range c.cpus {
			if !a.held[i] && a.load[i] == 0 {
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
	load := map[int]int{}
	var mem uint64
	for _, as := range live {
		mem += as.Request.Mem
		if as.Request.CPUs == 0 {
			load[as.CPUs[0]]++
		}
	}
	for i, c := range a.cpus {
		if a.load[i] != load[c.ID] {
			t.Errorf("cpu %d: load = %d, live runs sharing it %d", c.ID, a.load[i], load[c.ID])
		}
	}
	if mem != a.memUsed {
		t.Errorf("memory used = %d, live runs claim %d", a.memUsed, mem)
	}
	topo := Topology{}
	for _, u := range a.units {
		topo.GPUs = append(topo.GPUs, u.gpu)
	}
	units := modelUnits(topo, live)
	for _, u := range a.units {
		m := units[u.gpu.UUID]
		if u.runs != m.runs || u.own != m.own || u.share != m.share || u.mem != m.mem {
			t.Errorf("gpu %s: runs %d own %v share %d mem %d; live runs give %+v", u.gpu.UUID, u.runs, u.own, u.share, u.mem, *m)
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

// TestResizeAndHold: a run measured alone on its GPU shrinks its claim to
// what it uses and lets others join; a held GPU takes no new run.
func TestResizeAndHold(t *testing.T) {
	a := NewAllocator(withGPUMemory(Topology{CPUs: topoFourGPU.CPUs, GPUs: topoFourGPU.GPUs[:1]}, 40<<30))
	probe, err := a.Allocate(Request{GPUShare: GPUWhole, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(Request{GPUMem: 10 << 30, CPUs: 2}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a run beside a whole-GPU probe: %v, want busy", err)
	}
	if _, err := a.Allocate(Request{AutoGPUMem: true, CPUs: 2}); err == nil || errors.Is(err, ErrBusy) || errors.Is(err, ErrNeverFits) {
		t.Errorf("Allocate(gpu_mem=auto): %v, want invalid: the caller resolves auto", err)
	}
	a.Hold("GPU-four-0")
	probe, err = a.Resize(probe, Request{GPUMem: 10 << 30, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(Request{GPUMem: 10 << 30, CPUs: 2}); !errors.Is(err, ErrBusy) {
		t.Errorf("a run on a held GPU: %v, want busy", err)
	}
	a.Unhold("GPU-four-0")
	second, err := a.Allocate(Request{GPUMem: 10 << 30, CPUs: 2})
	if err != nil {
		t.Fatalf("a run beside the resized probe: %v", err)
	}
	if _, err := a.Resize(probe, Request{GPUMem: 30 << 30, CPUs: 2}); !errors.Is(err, ErrBusy) {
		t.Errorf("resize beyond the GPU: %v, want busy", err)
	}
	if _, err := a.Resize(probe, Request{GPUMem: 1 << 30, CPUs: 4}); err == nil || errors.Is(err, ErrBusy) {
		t.Errorf("resize of the CPUs: %v, want an error", err)
	}
	a.Release(probe)
	a.Release(second)
	checkBookkeeping(t, a, nil)
	if gpus, cpus := a.Free(); len(gpus) != 1 || len(cpus) != 64 {
		t.Errorf("after release Free() = %d GPUs, %d CPUs", len(gpus), len(cpus))
	}
}

// TestRetire: a GPU retired after a fault is never placed on again, not
// even after an Unhold; requests the GPUs left cannot serve never fit; a
// physical GPU's MIG devices retire with it.
func TestRetire(t *testing.T) {
	a := NewAllocator(topoFourGPU)
	uuid := topoFourGPU.GPUs[2].UUID
	if retired, none := a.Retire(uuid); !retired || none {
		t.Fatalf("Retire(%s) = %v, %v", uuid, retired, none)
	}
	if retired, _ := a.Retire(uuid); retired {
		t.Error("retired twice")
	}
	if retired, _ := a.Retire("GPU-unknown"); retired {
		t.Error("retired a GPU the node does not have")
	}
	a.Unhold(uuid) // the readiness gate's unhold must not bring it back
	var got []string
	for range 3 {
		as, err := a.Allocate(Request{GPUs: 1, CPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, as.GPUs[0].UUID)
	}
	if slices.Contains(got, uuid) {
		t.Errorf("placed on the retired GPU: %v", got)
	}
	if _, err := a.Allocate(Request{GPUs: 1, CPUs: 1}); !errors.Is(err, ErrBusy) {
		t.Errorf("a fourth 1-GPU run: %v, want busy", err)
	}
	if err := a.Check(Request{GPUs: 4, CPUs: 1}); !errors.Is(err, ErrNeverFits) {
		t.Errorf("4 GPUs with 3 left: %v, want never fits", err)
	}
	if err := a.Check(Request{GPUs: 3, CPUs: 1}); err != nil {
		t.Errorf("3 GPUs with 3 left: %v", err)
	}
	for _, g := range topoFourGPU.GPUs {
		a.Retire(g.UUID)
	}
	if err := a.Check(Request{GPUShare: 250, CPUs: 1}); !errors.Is(err, ErrNeverFits) || !strings.Contains(err.Error(), "out of use") {
		t.Errorf("a GPU run with none left: %v", err)
	}
	if err := a.Check(Request{CPUs: 1}); err != nil {
		t.Errorf("a CPU-only run with no GPU left: %v", err)
	}

	m := NewAllocator(topoMIG)
	if retired, none := m.Retire(topoMIG.GPUs[0].Parent); !retired || none {
		t.Fatalf("retiring a MIG GPU's parent: %v, %v", retired, none)
	}
	for range 7 {
		as, err := m.Allocate(Request{GPUs: 1, CPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		if as.GPUs[0].Parent == topoMIG.GPUs[0].Parent {
			t.Errorf("placed on %s of the retired GPU", as.GPUs[0].UUID)
		}
	}
	if _, none := m.Retire(topoMIG.GPUs[7].Parent); !none {
		t.Error("both GPUs retired, but some left")
	}
}
