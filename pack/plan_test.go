package pack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestNewPlan(t *testing.T) {
	tests := []struct {
		description  string
		topo         Topology
		opts         Options
		want         []string // describe(slot) per slot
		wantIdleGPUs int
		wantIdleCPUs string
	}{
		{
			description: "DGX A100 defaults: one run per GPU, each with its whole NUMA node",
			topo:        topoDGXA100,
			want: []string{
				"GPU-dgx-0 | 48-63,176-191 | numa 3",
				"GPU-dgx-1 | 32-47,160-175 | numa 2",
				"GPU-dgx-2 | 16-31,144-159 | numa 1",
				"GPU-dgx-3 | 0-15,128-143 | numa 0",
				"GPU-dgx-4 | 112-127,240-255 | numa 7",
				"GPU-dgx-5 | 96-111,224-239 | numa 6",
				"GPU-dgx-6 | 80-95,208-223 | numa 5",
				"GPU-dgx-7 | 64-79,192-207 | numa 4",
			},
		},
		{
			description: "DGX A100, 2 runs per GPU: both runs of a GPU get half its NUMA node in whole cores",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 16, RunsPerGPU: 2},
			want: []string{
				"GPU-dgx-0 | 48-55,176-183 | numa 3 shared-gpu",
				"GPU-dgx-0 | 56-63,184-191 | numa 3 shared-gpu",
				"GPU-dgx-1 | 32-39,160-167 | numa 2 shared-gpu",
				"GPU-dgx-1 | 40-47,168-175 | numa 2 shared-gpu",
				"GPU-dgx-2 | 16-23,144-151 | numa 1 shared-gpu",
				"GPU-dgx-2 | 24-31,152-159 | numa 1 shared-gpu",
				"GPU-dgx-3 | 0-7,128-135 | numa 0 shared-gpu",
				"GPU-dgx-3 | 8-15,136-143 | numa 0 shared-gpu",
				"GPU-dgx-4 | 112-119,240-247 | numa 7 shared-gpu",
				"GPU-dgx-4 | 120-127,248-255 | numa 7 shared-gpu",
				"GPU-dgx-5 | 96-103,224-231 | numa 6 shared-gpu",
				"GPU-dgx-5 | 104-111,232-239 | numa 6 shared-gpu",
				"GPU-dgx-6 | 80-87,208-215 | numa 5 shared-gpu",
				"GPU-dgx-6 | 88-95,216-223 | numa 5 shared-gpu",
				"GPU-dgx-7 | 64-71,192-199 | numa 4 shared-gpu",
				"GPU-dgx-7 | 72-79,200-207 | numa 4 shared-gpu",
			},
		},
		{
			description: "DGX A100, 2 GPUs per run: both GPUs on one socket, CPUs from their two NUMA nodes",
			topo:        topoDGXA100,
			opts:        Options{GPUsPerRun: 2},
			want: []string{
				"GPU-dgx-0,GPU-dgx-1 | 32-63,160-191 | numa -1",
				"GPU-dgx-2,GPU-dgx-3 | 0-31,128-159 | numa -1",
				"GPU-dgx-4,GPU-dgx-5 | 96-127,224-255 | numa -1",
				"GPU-dgx-6,GPU-dgx-7 | 64-95,192-223 | numa -1",
			},
		},
		{
			description: "DGX A100, fewer runs than GPUs: 64 CPUs each, half near, GPUs chosen so that each gets a free NUMA node",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 4},
			want: []string{
				"GPU-dgx-0 | 0-15,48-63,128-143,176-191 | numa -1",
				"GPU-dgx-1 | 16-47,144-175 | numa -1",
				"GPU-dgx-4 | 64-79,112-127,192-207,240-255 | numa -1",
				"GPU-dgx-5 | 80-111,208-239 | numa -1",
			},
			wantIdleGPUs: 4,
		},
		{
			description: "DGX A100, 12 CPUs per run: the rest of the CPUs idle",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 2, CPUsPerRun: 12},
			want: []string{
				"GPU-dgx-0 | 48-53,176-181 | numa 3",
				"GPU-dgx-1 | 32-37,160-165 | numa 2",
			},
			wantIdleGPUs: 6,
			wantIdleCPUs: "0-31,38-47,54-159,166-175,182-255",
		},
		{
			description: "4 GPUs on 2 sockets: two runs per socket",
			topo:        topoFourGPU,
			want: []string{
				"GPU-four-0 | 0-7,32-39 | numa 0",
				"GPU-four-1 | 8-15,40-47 | numa 0",
				"GPU-four-2 | 16-23,48-55 | numa 1",
				"GPU-four-3 | 24-31,56-63 | numa 1",
			},
		},
		{
			description: "4 GPUs on 2 sockets, 2 GPUs per run: one socket each",
			topo:        topoFourGPU,
			opts:        Options{GPUsPerRun: 2},
			want: []string{
				"GPU-four-0,GPU-four-1 | 0-15,32-47 | numa 0",
				"GPU-four-2,GPU-four-3 | 16-31,48-63 | numa 1",
			},
		},
		{
			description: "CPU-only node: one run per physical core, siblings together",
			topo:        topoCPUOnly,
			want: []string{
				"- | 0,16 | numa 0", "- | 1,17 | numa 0", "- | 2,18 | numa 0", "- | 3,19 | numa 0",
				"- | 4,20 | numa 0", "- | 5,21 | numa 0", "- | 6,22 | numa 0", "- | 7,23 | numa 0",
				"- | 8,24 | numa 1", "- | 9,25 | numa 1", "- | 10,26 | numa 1", "- | 11,27 | numa 1",
				"- | 12,28 | numa 1", "- | 13,29 | numa 1", "- | 14,30 | numa 1", "- | 15,31 | numa 1",
			},
		},
		{
			description: "CPU-only node, 3 runs: 5 whole cores each, one core idle",
			topo:        topoCPUOnly,
			opts:        Options{Parallel: 3},
			want: []string{
				"- | 0-4,16-20 | numa 0",
				"- | 8-12,24-28 | numa 1",
				"- | 5-7,13-14,21-23,29-30 | numa -1",
			},
			wantIdleCPUs: "15,31",
		},
		{
			description: "restricted Slurm cpuset, one GPU: the run gets every allowed CPU",
			topo:        topoSlurmCpuset,
			want:        []string{"GPU-slurm-0 | 2-3,7,9-12 | numa 0"},
		},
		{
			description: "restricted Slurm cpuset, 2 runs: whole cores of uneven size",
			topo:        topoSlurmCpuset,
			opts:        Options{Parallel: 2, RunsPerGPU: 2},
			want: []string{
				"GPU-slurm-0 | 2,7,10 | numa 0 shared-gpu",
				"GPU-slurm-0 | 3,9,11 | numa 0 shared-gpu",
			},
			wantIdleCPUs: "12",
		},
		{
			description: "restricted Slurm cpuset without the GPU: one run per core, the one-thread cores first",
			topo:        Topology{CPUs: topoSlurmCpuset.CPUs},
			want: []string{
				"- | 7 | numa 0", "- | 9 | numa 0", "- | 12 | numa 0",
				"- | 2 | numa 0", "- | 10 | numa 0",
			},
			wantIdleCPUs: "3,11",
		},
		{
			description: "7 MIG devices per GPU: one run per MIG device, near its parent GPU",
			topo:        topoMIG,
			want: []string{
				"MIG-mig-0-0 | 0-1,32-33 | numa 0",
				"MIG-mig-0-1 | 2-3,34-35 | numa 0",
				"MIG-mig-0-2 | 4-5,36-37 | numa 0",
				"MIG-mig-0-3 | 6-7,38-39 | numa 0",
				"MIG-mig-0-4 | 8-9,40-41 | numa 0",
				"MIG-mig-0-5 | 10-11,42-43 | numa 0",
				"MIG-mig-0-6 | 12-13,44-45 | numa 0",
				"MIG-mig-1-0 | 16-17,48-49 | numa 1",
				"MIG-mig-1-1 | 18-19,50-51 | numa 1",
				"MIG-mig-1-2 | 20-21,52-53 | numa 1",
				"MIG-mig-1-3 | 22-23,54-55 | numa 1",
				"MIG-mig-1-4 | 24-25,56-57 | numa 1",
				"MIG-mig-1-5 | 26-27,58-59 | numa 1",
				"MIG-mig-1-6 | 28-29,60-61 | numa 1",
			},
			wantIdleCPUs: "14-15,30-31,46-47,62-63",
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			p, err := NewPlan(tc.topo, tc.opts)
			if err != nil {
				t.Fatalf("NewPlan(%+v) error: %v", tc.opts, err)
			}
			var got []string
			for i, s := range p.Slots {
				if s.Index != i {
					t.Errorf("Slots[%d].Index = %d", i, s.Index)
				}
				got = append(got, describe(s.Assignment))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("NewPlan(%+v) slots:\n%s\nwant:\n%s", tc.opts, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if len(p.IdleGPUs) != tc.wantIdleGPUs {
				t.Errorf("IdleGPUs = %d GPUs, want %d", len(p.IdleGPUs), tc.wantIdleGPUs)
			}
			if got := FormatCPUList(p.IdleCPUs); got != tc.wantIdleCPUs {
				t.Errorf("IdleCPUs = %q, want %q", got, tc.wantIdleCPUs)
			}
			if len(p.Warnings) != 0 {
				t.Errorf("Warnings = %q, want none", texts(p.Warnings))
			}
			checkPlan(t, tc.topo, p)
		})
	}
}

// TestNewPlanDoneWhen is issue 3's acceptance test: on a DGX-like node,
// --parallel 16 --runs-per-gpu 2 gives 16 slots, each with whole cores near
// its GPU's NUMA node, and no CPU twice.
func TestNewPlanDoneWhen(t *testing.T) {
	p, err := NewPlan(topoDGXA100, Options{Parallel: 16, RunsPerGPU: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Slots) != 16 {
		t.Fatalf("got %d slots, want 16", len(p.Slots))
	}
	owner := map[int]int{}
	perGPU := map[string]int{}
	for _, s := range p.Slots {
		if len(s.GPUs) != 1 {
			t.Fatalf("slot %d has %d GPUs, want 1", s.Index, len(s.GPUs))
		}
		g := s.GPUs[0]
		perGPU[g.UUID]++
		if split := splitCores(topoDGXA100, s.CPUs); len(split) > 0 {
			t.Errorf("slot %d: split cores %v", s.Index, split)
		}
		if len(s.CPUs) != 16 {
			t.Errorf("slot %d: %d CPUs, want 16", s.Index, len(s.CPUs))
		}
		for _, id := range s.CPUs {
			if c, _ := topoCPU(topoDGXA100, id); c.NUMA != g.NUMA {
				t.Errorf("slot %d: CPU %d on NUMA node %d, its GPU on %d", s.Index, id, c.NUMA, g.NUMA)
			}
			if prev, ok := owner[id]; ok {
				t.Errorf("CPU %d in slots %d and %d", id, prev, s.Index)
			}
			owner[id] = s.Index
		}
		if s.NUMA != g.NUMA {
			t.Errorf("slot %d: NUMA = %d, want %d", s.Index, s.NUMA, g.NUMA)
		}
	}
	for uuid, n := range perGPU {
		if n != 2 {
			t.Errorf("GPU %s serves %d slots, want 2", uuid, n)
		}
	}
}

func TestNewPlanSharedCPUs(t *testing.T) {
	// One CPU per NUMA node of the DGX: 8 CPUs for 16 runs.
	fewCPUs := Topology{
		CPUs: restrict(topoDGXA100.CPUs, 0, 16, 32, 48, 64, 80, 96, 112),
		GPUs: topoDGXA100.GPUs,
	}
	laptop := Topology{
		CPUs: cpusSMT(1, 1, 2, 2),
		GPUs: wholeGPUs("laptop", cpusSMT(1, 1, 2, 2), 0),
	}
	tests := []struct {
		description string
		topo        Topology
		opts        Options
		want        []string
		wantWarning string
	}{
		{
			description: "16 runs on 8 CPUs: two runs on every CPU, the first run of each GPU near it",
			topo:        fewCPUs,
			opts:        Options{Parallel: 16, RunsPerGPU: 2},
			want: []string{
				"GPU-dgx-0 | 48 | numa 3 shared-gpu shared-cpu", "GPU-dgx-0 | 0 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-1 | 32 | numa 2 shared-gpu shared-cpu", "GPU-dgx-1 | 16 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-2 | 64 | numa -1 shared-gpu shared-cpu", "GPU-dgx-2 | 80 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-3 | 96 | numa -1 shared-gpu shared-cpu", "GPU-dgx-3 | 112 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-4 | 112 | numa 7 shared-gpu shared-cpu", "GPU-dgx-4 | 64 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-5 | 96 | numa 6 shared-gpu shared-cpu", "GPU-dgx-5 | 80 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-6 | 0 | numa -1 shared-gpu shared-cpu", "GPU-dgx-6 | 16 | numa -1 shared-gpu shared-cpu",
				"GPU-dgx-7 | 32 | numa -1 shared-gpu shared-cpu", "GPU-dgx-7 | 48 | numa -1 shared-gpu shared-cpu",
			},
			wantWarning: "Parallel=16: 16 runs at once share 8 CPUs, up to 2 on one CPU; lower Parallel to give each run CPUs of its own",
		},
		{
			description: "laptop, 6 runs on one GPU and 4 CPUs: no CPU serves more than one run above another",
			topo:        laptop,
			opts:        Options{RunsPerGPU: 6},
			want: []string{
				"GPU-laptop-0 | 0 | numa 0 shared-gpu shared-cpu",
				"GPU-laptop-0 | 1 | numa 0 shared-gpu shared-cpu",
				"GPU-laptop-0 | 2 | numa 0 shared-gpu",
				"GPU-laptop-0 | 3 | numa 0 shared-gpu",
				"GPU-laptop-0 | 0 | numa 0 shared-gpu shared-cpu",
				"GPU-laptop-0 | 1 | numa 0 shared-gpu shared-cpu",
			},
			wantWarning: "RunsPerGPU=6 on 1 GPU: 6 runs at once share 4 CPUs, up to 2 on one CPU; CPUsPerRun=1 gives each run a CPU of its own, with fewer at once",
		},
		{
			description: "CPU-only node, 40 runs on 32 CPUs",
			topo:        topoCPUOnly,
			opts:        Options{Parallel: 40},
			wantWarning: "Parallel=40: 40 runs at once share 32 CPUs, up to 2 on one CPU; lower Parallel to give each run CPUs of its own",
		},
		{
			description: "too few CPUs allowed (a job that asked for fewer CPUs than GPUs): four GPUs, one run each, on two CPUs; not blamed on the node",
			topo:        Topology{CPUs: topoFourGPU.CPUs[:2], GPUs: topoFourGPU.GPUs},
			opts:        Options{},
			wantWarning: "2 CPUs allowed here for 4 GPUs: the 4 runs at once (one per GPU) share 2 CPUs, up to 2 on one CPU; a batch job that asks for a whole node, or for more CPUs, gives each run CPUs of its own",
		},
		{
			description: "--gpus-per-run 0.5 causes it: eight runs on four GPUs and four CPUs",
			topo:        Topology{CPUs: topoFourGPU.CPUs[:4], GPUs: topoFourGPU.GPUs},
			opts:        Options{GPUShare: 500},
			wantWarning: "GPUShare=0.5 on 4 GPUs: 8 runs at once share 4 CPUs, up to 2 on one CPU; CPUsPerRun=1 gives each run a CPU of its own, with fewer at once",
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			p, err := NewPlan(tc.topo, tc.opts)
			if err != nil {
				t.Fatalf("NewPlan(%+v) error: %v", tc.opts, err)
			}
			if tc.want != nil {
				var got []string
				for _, s := range p.Slots {
					got = append(got, describe(s.Assignment))
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("NewPlan(%+v) slots:\n%s\nwant:\n%s", tc.opts, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			}
			if got := texts(p.Warnings); !slices.Equal(got, []string{tc.wantWarning}) {
				t.Errorf("Warnings = %q, want %q", got, tc.wantWarning)
			}
			if p.Request.CPUs != 0 {
				t.Errorf("Request.CPUs = %d, want 0 (a shared CPU)", p.Request.CPUs)
			}
			checkPlan(t, tc.topo, p)
		})
	}
}

func TestNewPlanFitError(t *testing.T) {
	tests := []struct {
		description string
		topo        Topology
		opts        Options
		want        string
	}{
		{
			description: "more runs than GPUs",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 12},
			want:        "Parallel=12 does not fit 8 GPUs with GPUsPerRun=1: use Parallel=8, or RunsPerGPU=2 with Parallel=16",
		},
		{
			description: "more runs than GPU shares",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 20, RunsPerGPU: 2},
			want:        "Parallel=20 does not fit 8 GPUs with RunsPerGPU=2: use Parallel=16, or RunsPerGPU=3 with Parallel=24",
		},
		{
			description: "too many runs of 2 GPUs",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 8, GPUsPerRun: 2},
			want:        "Parallel=8 does not fit 8 GPUs with GPUsPerRun=2: use Parallel=4, or GPUsPerRun=1 with Parallel=8",
		},
		{
			description: "more GPUs per run than the node has",
			topo:        topoDGXA100,
			opts:        Options{GPUsPerRun: 16},
			want:        "GPUsPerRun=16 does not fit 8 GPUs: use GPUsPerRun=8",
		},
		{
			description: "more GPUs per run than the node has, with --parallel",
			topo:        topoFourGPU,
			opts:        Options{GPUsPerRun: 5, Parallel: 2},
			want:        "GPUsPerRun=5 does not fit 4 GPUs: use GPUsPerRun=4 with Parallel=1",
		},
		{
			description: "GPUs per run and runs per GPU together",
			topo:        topoDGXA100,
			opts:        Options{GPUsPerRun: 2, RunsPerGPU: 2},
			want:        "GPUsPerRun=2 and RunsPerGPU=2 exclude each other: use GPUsPerRun=2, or RunsPerGPU=2",
		},
		{
			description: "2 MIG devices per run",
			topo:        topoMIG,
			opts:        Options{GPUsPerRun: 2},
			want:        "GPUsPerRun=2 does not fit 14 MIG devices (a run gets at most one): use GPUsPerRun=1",
		},
		{
			description: "more runs than MIG devices",
			topo:        topoMIG,
			opts:        Options{Parallel: 20},
			want:        "Parallel=20 does not fit 14 MIG devices with GPUsPerRun=1: use Parallel=14, or RunsPerGPU=2 with Parallel=28",
		},
		{
			description: "GPUs asked of a CPU-only node",
			topo:        topoCPUOnly,
			opts:        Options{GPUsPerRun: 1},
			want:        "GPUsPerRun=1 does not fit a node without GPUs",
		},
		{
			description: "runs per GPU on a CPU-only node",
			topo:        topoCPUOnly,
			opts:        Options{RunsPerGPU: 2},
			want:        "RunsPerGPU=2 does not fit a node without GPUs",
		},
		{
			description: "explicit CPUs per run that do not fit an explicit parallelism",
			topo:        topoDGXA100,
			opts:        Options{Parallel: 8, CPUsPerRun: 40},
			want:        "CPUsPerRun=40 with Parallel=8 needs 320 CPUs, the node has 256: use CPUsPerRun=32, or Parallel=6",
		},
		{
			description: "explicit CPUs per run above the node",
			topo:        topoDGXA100,
			opts:        Options{CPUsPerRun: 300},
			want:        "CPUsPerRun=300 does not fit 256 CPUs: use CPUsPerRun=256 with Parallel=1",
		},
		{
			description: "explicit CPUs per run on a CPU-only node with more runs than CPUs",
			topo:        topoCPUOnly,
			opts:        Options{Parallel: 40, CPUsPerRun: 1},
			want:        "CPUsPerRun=1 with Parallel=40 needs 40 CPUs, the node has 32: use Parallel=32",
		},
		{
			description: "negative value",
			topo:        topoDGXA100,
			opts:        Options{Parallel: -1},
			want:        "Parallel=-1: must not be negative",
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			p, err := NewPlan(tc.topo, tc.opts)
			var fe *FitError
			if !errors.As(err, &fe) {
				t.Fatalf("NewPlan(%+v) = %d slots, %v; want a *FitError", tc.opts, len(p.Slots), err)
			}
			if err.Error() != tc.want {
				t.Errorf("NewPlan(%+v) error:\n got %s\nwant %s", tc.opts, err, tc.want)
			}
		})
	}
}

// TestCPUsPerRunSetsTheDefaultParallelism: without --parallel, as many
// runs go at once as --cpus-per-run allows, rather than an error; GPUs
// that are left over are named in a warning.
func TestCPUsPerRunSetsTheDefaultParallelism(t *testing.T) {
	twoCPUs := Topology{CPUs: []CPU{{ID: 0, Core: 0, NUMA: 0}, {ID: 1, Core: 1, NUMA: 0}}}
	tests := []struct {
		description string
		topo        Topology
		opts        Options
		wantSlots   int
		wantWarning string
	}{
		{"2 CPUs, no GPUs, 2 CPUs per run: one run at a time", twoCPUs, Options{CPUsPerRun: 2}, 1, ""},
		{"32 CPUs, no GPUs, 5 CPUs per run", topoCPUOnly, Options{CPUsPerRun: 5}, 6, ""},
		{"DGX A100, 40 CPUs per run: 6 of 8 GPUs used", topoDGXA100, Options{CPUsPerRun: 40}, 6, "CPUsPerRun=40 leaves room for 6 runs at once on 256 CPUs: 2 GPUs idle"},
		{"DGX A100, 32 CPUs per run: every GPU", topoDGXA100, Options{CPUsPerRun: 32}, 8, ""},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			p, err := NewPlan(tc.topo, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Slots) != tc.wantSlots || p.Request.CPUs != tc.opts.CPUsPerRun {
				t.Errorf("%d slots of %d CPUs, want %d of %d", len(p.Slots), p.Request.CPUs, tc.wantSlots, tc.opts.CPUsPerRun)
			}
			if got := strings.Join(texts(p.Warnings), "; "); got != tc.wantWarning {
				t.Errorf("warnings %q, want %q", got, tc.wantWarning)
			}
		})
	}
}

func TestNewPlanTopologyError(t *testing.T) {
	tests := []struct {
		description string
		topo        Topology
		want        string
	}{
		{"no CPUs", Topology{GPUs: topoFourGPU.GPUs}, "plan: topology has no cpus"},
		{"duplicate CPU", Topology{CPUs: []CPU{{ID: 1}, {ID: 1}}}, "plan: topology: cpu 1 listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := NewPlan(tc.topo, Options{})
			var fe *FitError
			if err == nil || errors.As(err, &fe) || err.Error() != tc.want {
				t.Errorf("NewPlan error = %v, want %q (not a *FitError)", err, tc.want)
			}
		})
	}
}

// TestNewPlanDeterministic checks that the plan depends only on the
// topology and options, not on the order in which the inventory lists CPUs.
func TestNewPlanDeterministic(t *testing.T) {
	shuffled := Topology{CPUs: slices.Clone(topoDGXA100.CPUs), GPUs: topoDGXA100.GPUs}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled.CPUs), func(i, j int) {
		shuffled.CPUs[i], shuffled.CPUs[j] = shuffled.CPUs[j], shuffled.CPUs[i]
	})
	for _, o := range []Options{{}, {Parallel: 16, RunsPerGPU: 2}, {GPUsPerRun: 2}, {Parallel: 5, CPUsPerRun: 7}} {
		want, err := NewPlan(topoDGXA100, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, topo := range []Topology{topoDGXA100, shuffled} {
			got, err := NewPlan(topo, o)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("NewPlan(%+v) differs between calls", o)
			}
		}
	}
}

// TestNewPlanRandom plans random options on random topologies: the default
// options always fit, any error is a *FitError, and every plan keeps the
// invariants of checkPlan.
func TestNewPlanRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		topo := randomTopology(r)
		if len(topo.CPUs) == 0 {
			continue
		}
		opts := []Options{{}, {
			Parallel:   r.IntN(20),
			GPUsPerRun: r.IntN(3),
			RunsPerGPU: r.IntN(4),
			CPUsPerRun: r.IntN(3) * r.IntN(6),
		}}
		for i, o := range opts {
			p, err := NewPlan(topo, o)
			if err != nil {
				var fe *FitError
				if i == 0 || !errors.As(err, &fe) {
					t.Fatalf("NewPlan(%+v, %+v) error: %v", topo, o, err)
				}
				continue
			}
			if o.Parallel > 0 && len(p.Slots) != o.Parallel {
				t.Errorf("NewPlan(%+v) = %d slots", o, len(p.Slots))
			}
			checkPlan(t, topo, p)
		}
	}
}

// checkPlan checks the invariants every plan keeps: every slot gets the
// request's GPUs and CPUs from t; a CPU serves two slots only when CPUs are
// shared, and then loads differ by at most one; a GPU serves two slots only
// under RunsPerGPU, and never more than RunsPerGPU; a multi-GPU slot has no
// MIG device; idle and used resources together are t's, each once.
func checkPlan(t *testing.T, topo Topology, p Plan) {
	t.Helper()
	cpuLoad := map[int]int{}
	gpuLoad := map[string]int{}
	shared := false
	wantGPUs := p.Request.GPUs
	if p.Request.SharesGPU() {
		wantGPUs = 1
	}
	for _, s := range p.Slots {
		if len(s.GPUs) != wantGPUs {
			t.Errorf("slot %d: %d GPUs, want %d", s.Index, len(s.GPUs), wantGPUs)
		}
		if len(s.CPUs) != max(p.Request.CPUs, 1) {
			t.Errorf("slot %d: %d CPUs, want %d", s.Index, len(s.CPUs), max(p.Request.CPUs, 1))
		}
		if !slices.IsSorted(s.CPUs) {
			t.Errorf("slot %d: CPUs %v not ascending", s.Index, s.CPUs)
		}
		shared = shared || s.SharedCPUs
		for _, id := range s.CPUs {
			if _, ok := topoCPU(topo, id); !ok {
				t.Errorf("slot %d: CPU %d not in the topology", s.Index, id)
			}
			cpuLoad[id]++
		}
		for _, g := range s.GPUs {
			if g.MIG && len(s.GPUs) > 1 {
				t.Errorf("slot %d: MIG device %s in a %d-GPU run", s.Index, g.UUID, len(s.GPUs))
			}
			if !slices.ContainsFunc(topo.GPUs, func(h GPU) bool { return h.UUID == g.UUID }) {
				t.Errorf("slot %d: GPU %s not in the topology", s.Index, g.UUID)
			}
			gpuLoad[g.UUID]++
		}
	}
	for _, s := range p.Slots {
		for _, id := range s.CPUs {
			if s.SharedCPUs != (cpuLoad[id] > 1) {
				t.Errorf("slot %d: SharedCPUs = %v, but CPU %d serves %d slots", s.Index, s.SharedCPUs, id, cpuLoad[id])
			}
		}
	}
	if shared {
		loads := slices.Collect(func(yield func(int) bool) {
			for _, c := range topo.CPUs {
				yield(cpuLoad[c.ID])
			}
		})
		if slices.Max(loads)-slices.Min(loads) > 1 {
			t.Errorf("shared CPUs serve between %d and %d slots", slices.Min(loads), slices.Max(loads))
		}
	}
	for uuid, n := range gpuLoad {
		if n > max(p.RunsPerGPU, 1) || !p.Request.SharesGPU() && n > 1 || p.Request.GPUShare*n > GPUWhole {
			t.Errorf("GPU %s serves %d slots of %v, RunsPerGPU %d", uuid, n, p.Request, p.RunsPerGPU)
		}
	}
	for _, id := range p.IdleCPUs {
		if cpuLoad[id] > 0 {
			t.Errorf("CPU %d both idle and used", id)
		}
		cpuLoad[id]++
	}
	for _, c := range topo.CPUs {
		if cpuLoad[c.ID] == 0 {
			t.Errorf("CPU %d neither idle nor used", c.ID)
		}
	}
	for _, g := range p.IdleGPUs {
		if gpuLoad[g.UUID] > 0 {
			t.Errorf("GPU %s both idle and used", g.UUID)
		}
		gpuLoad[g.UUID]++
	}
	for _, g := range topo.GPUs {
		if gpuLoad[g.UUID] == 0 {
			t.Errorf("GPU %s neither idle nor used", g.UUID)
		}
	}
}

// TestNewPlanSharing: the sharing flags give the first wave and the
// request the runs default to.
func TestNewPlanSharing(t *testing.T) {
	dgx40 := withGPUMemory(topoDGXA100, 40<<30) // 38 GiB a GPU for sharers
	tests := []struct {
		description    string
		topo           Topology
		opts           Options
		wantSlots      int
		wantRunsPerGPU int
		wantRequest    string
	}{
		{"--gpus-per-run 0.25: four runs a GPU, a quarter of its CPUs each", topoDGXA100, Options{GPUShare: 250}, 32, 4, "gpus=0.25 cpus=8"},
		{"--runs-per-gpu 3: thirds", topoFourGPU, Options{RunsPerGPU: 3}, 12, 3, "gpus=0.333 cpus=4"},
		{"--gpu-mem-per-run 12GiB: three of 12 GiB fit 38 GiB", dgx40, Options{GPUMem: 12 << 30}, 24, 3, "gpu_mem=12GiB cpus=10"},
		{"--gpu-mem-per-run with a share: the share bounds it", dgx40, Options{GPUMem: 4 << 30, GPUShare: 500}, 16, 2, "gpus=0.5 gpu_mem=4GiB cpus=16"},
		{"--gpu-mem-per-run auto: one run a GPU, measured first", dgx40, Options{AutoGPUMem: true}, 8, 1, "gpu_mem=auto cpus=8"},
		{"--mem-per-run bounds the runs at once", Topology{CPUs: topoCPUOnly.CPUs, Memory: 64 << 30}, Options{Mem: 20 << 30}, 3, 0, "gpus=0 cpus=10 mem=20GiB"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			p, err := NewPlan(tc.topo, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Slots) != tc.wantSlots || p.RunsPerGPU != tc.wantRunsPerGPU || p.Request.String() != tc.wantRequest {
				t.Errorf("NewPlan(%+v) = %d slots, %d per GPU, each %q; want %d, %d, %q", tc.opts,
					len(p.Slots), p.RunsPerGPU, p.Request, tc.wantSlots, tc.wantRunsPerGPU, tc.wantRequest)
			}
			checkPlan(t, tc.topo, p)
		})
	}
	for _, tc := range []struct {
		topo Topology
		opts Options
		want string
	}{
		{topoDGXA100, Options{GPUShare: 250, RunsPerGPU: 2}, "GPUShare=0.25 and RunsPerGPU=2 say the same thing twice: give one"},
		{topoDGXA100, Options{RunsPerGPU: 1001}, "RunsPerGPU=1001: at most 1000 runs share one GPU"},
		{topoDGXA100, Options{GPUMem: 1 << 30}, "GPUMem=1GiB: the GPUs' memory is not known (no NVML), so gpu_mem cannot be granted"},
		{dgx40, Options{GPUMem: 39 << 30}, "GPUMem=39GiB: a run sharing a GPU may claim at most 38GiB of its memory (40GiB less 2GiB headroom)"},
		{dgx40, Options{GPUMem: 12 << 30, Parallel: 30}, "Parallel=30 does not fit 8 GPUs with GPUMem=12GiB: use Parallel=24"},
		{dgx40, Options{GPUMem: 12 << 30, GPUsPerRun: 2}, "GPUMem shares GPUs by memory: it excludes GPUsPerRun=2"},
		{topoCPUOnly, Options{GPUShare: 500}, "GPUShare=0.5 does not fit a node without GPUs"},
		{topoCPUOnly, Options{Mem: 1 << 30}, "Mem=1GiB: the node's memory is not known, so mem cannot be granted"},
		{Topology{CPUs: topoCPUOnly.CPUs, Memory: 64 << 30}, Options{Mem: 20 << 30, Parallel: 4}, "Mem=20GiB with Parallel=4 needs 80GiB, the node has 64GiB: use Parallel=3"},
	} {
		_, err := NewPlan(tc.topo, tc.opts)
		var fe *FitError
		if !errors.As(err, &fe) || err.Error() != tc.want {
			t.Errorf("NewPlan(%+v) error:\n got %v\nwant %s", tc.opts, err, tc.want)
		}
	}
}

// TestNewPlanRunsCutsTheFirstWave checks Options.Runs: the plan lays out
// no more slots than there are runs — those a plan without it lays out
// first — with the Request, Parallel and warnings of the whole --parallel.
func TestNewPlanRunsCutsTheFirstWave(t *testing.T) {
	for _, tc := range []struct {
		description string
		topo        Topology
		opts        Options
		runs        int
	}{
		{"a million runs at once, 4 runs: 4 slots", topoCPUOnly, Options{Parallel: 1_000_000}, 4},
		{"16 runs sharing 8 GPUs, 3 runs", topoDGXA100, Options{Parallel: 16, RunsPerGPU: 2}, 3},
		{"more runs than slots: the whole plan", topoFourGPU, Options{}, 100},
		{"one run", topoCPUOnly, Options{CPUsPerRun: 2}, 1},
	} {
		t.Run(tc.description, func(t *testing.T) {
			whole := tc.opts
			if whole.Parallel > 1000 {
				whole.Parallel = 1000 // the same request and sharing, laid out in full
			}
			full, err := NewPlan(tc.topo, whole)
			if err != nil {
				t.Fatal(err)
			}
			cut := tc.opts
			cut.Runs = tc.runs
			p, err := NewPlan(tc.topo, cut)
			if err != nil {
				t.Fatal(err)
			}
			want := min(tc.runs, max(tc.opts.Parallel, full.Parallel))
			if len(p.Slots) != want {
				t.Fatalf("%d slots, want %d", len(p.Slots), want)
			}
			if wantParallel := max(tc.opts.Parallel, full.Parallel); p.Parallel != wantParallel {
				t.Errorf("Parallel %d, want %d", p.Parallel, wantParallel)
			}
			if p.Request != full.Request {
				t.Errorf("request %v, want %v", p.Request, full.Request)
			}
			for i, s := range p.Slots {
				// The same places; SharedCPUs says whether the runs laid
				// out share, which fewer runs may not.
				got, want := fmt.Sprint(s.GPUs, s.CPUs, s.NUMA), fmt.Sprint(full.Slots[i].GPUs, full.Slots[i].CPUs, full.Slots[i].NUMA)
				if got != want {
					t.Errorf("slot %d: %s, want %s", i, got, want)
				}
			}
			if tc.opts.Parallel == whole.Parallel && !slices.Equal(texts(p.Warnings), texts(full.Warnings)) {
				t.Errorf("warnings %q, want %q", texts(p.Warnings), texts(full.Warnings))
			}
		})
	}
	p, err := NewPlan(topoCPUOnly, Options{Parallel: 1_000_000, Runs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Parallel=1000000: 1000000 runs at once share %d CPUs, up to %d on one CPU", len(topoCPUOnly.CPUs), (1_000_000+len(topoCPUOnly.CPUs)-1)/len(topoCPUOnly.CPUs)); len(p.Warnings) != 1 || !strings.HasPrefix(p.Warnings[0].String(), want) {
		t.Errorf("warnings %q, want %q…", texts(p.Warnings), want)
	}
}

// texts returns the notes worded with Options' fields.
func texts(notes []Note) []string {
	var s []string
	for _, n := range notes {
		s = append(s, n.String())
	}
	return s
}

// TestNewSweepPlan: where fewer runs of the default request than
// Parallel fit, a sweep's plan is the one without Parallel, with a
// warning naming the setting (runs asking for less fill the rest); where
// they fit, or the settings fit nowhere, it is NewPlan's.
func TestNewSweepPlan(t *testing.T) {
	plan, err := NewSweepPlan(topoDGXA100, Options{Parallel: 12, Runs: 1})
	if err != nil || plan.Parallel != 8 || len(plan.Warnings) != 1 ||
		plan.Warnings[0].String() != "Parallel=12: 8 runs asking for 1 GPU, 32 CPUs fit at once; runs asking for less fill the rest, up to 12" {
		t.Errorf("Parallel 12 on 8 GPUs: parallel %d, warnings %q, %v", plan.Parallel, plan.Warnings, err)
	}
	if w := plan.Warnings[0].Words(func(s Setting) string { return "--" + strings.ToLower(s.Field) + " " + s.Value }); !strings.HasPrefix(w, "--parallel 12: ") {
		t.Errorf("the warning worded as flags: %q", w)
	}
	if plan, err := NewSweepPlan(topoDGXA100, Options{Parallel: 4, Runs: 1}); err != nil || plan.Parallel != 4 || len(plan.Warnings) != 0 {
		t.Errorf("Parallel 4 on 8 GPUs: parallel %d, warnings %q, %v; want NewPlan's", plan.Parallel, plan.Warnings, err)
	}
	var fe *FitError
	if _, err := NewSweepPlan(topoDGXA100, Options{GPUsPerRun: 16, Runs: 1}); !errors.As(err, &fe) {
		t.Errorf("16 GPUs a run on 8: %v, want a *FitError", err)
	}
}
