package pack_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// node is a small 2-socket machine: 4 cores with 2 hyperthreads per socket
// (CPU i and i+8 are siblings), one NUMA node per socket, one GPU on each.
var node = pack.Topology{
	CPUs: []pack.CPU{
		{ID: 0, Core: 0, Socket: 0, NUMA: 0}, {ID: 1, Core: 1, Socket: 0, NUMA: 0},
		{ID: 2, Core: 2, Socket: 0, NUMA: 0}, {ID: 3, Core: 3, Socket: 0, NUMA: 0},
		{ID: 4, Core: 0, Socket: 1, NUMA: 1}, {ID: 5, Core: 1, Socket: 1, NUMA: 1},
		{ID: 6, Core: 2, Socket: 1, NUMA: 1}, {ID: 7, Core: 3, Socket: 1, NUMA: 1},
		{ID: 8, Core: 0, Socket: 0, NUMA: 0}, {ID: 9, Core: 1, Socket: 0, NUMA: 0},
		{ID: 10, Core: 2, Socket: 0, NUMA: 0}, {ID: 11, Core: 3, Socket: 0, NUMA: 0},
		{ID: 12, Core: 0, Socket: 1, NUMA: 1}, {ID: 13, Core: 1, Socket: 1, NUMA: 1},
		{ID: 14, Core: 2, Socket: 1, NUMA: 1}, {ID: 15, Core: 3, Socket: 1, NUMA: 1},
	},
	GPUs: []pack.GPU{
		{Index: 0, UUID: "GPU-a", NUMA: 0},
		{Index: 1, UUID: "GPU-b", NUMA: 1},
	},
}

// A static plan: two runs share each GPU, and each run gets whole cores on
// its GPU's NUMA node.
func ExampleNewPlan() {
	plan, err := pack.NewPlan(node, pack.Options{RunsPerGPU: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range plan.Slots {
		fmt.Printf("slot %d: gpu %s, cpus %s, numa %d\n", s.Index, s.GPUs[0].UUID, pack.FormatCPUList(s.CPUs), s.NUMA)
	}
	fmt.Printf("idle: %d gpus, cpus %q\n", len(plan.IdleGPUs), pack.FormatCPUList(plan.IdleCPUs))
	// Output:
	// slot 0: gpu GPU-a, cpus 0-1,8-9, numa 0
	// slot 1: gpu GPU-a, cpus 2-3,10-11, numa 0
	// slot 2: gpu GPU-b, cpus 4-5,12-13, numa 1
	// slot 3: gpu GPU-b, cpus 6-7,14-15, numa 1
	// idle: 0 gpus, cpus ""
}

// A combination that does not fit is a *FitError whose message names the
// nearest choices that do.
func ExampleFitError() {
	_, err := pack.NewPlan(node, pack.Options{Parallel: 3})
	var fe *pack.FitError
	if errors.As(err, &fe) {
		fmt.Println(err)
		// A command line words the settings as the flags that give them.
		flags := map[string]string{"Parallel": "--parallel", "GPUsPerRun": "--gpus-per-run", "RunsPerGPU": "--runs-per-gpu"}
		fmt.Println(fe.Words(func(s pack.Setting) string { return flags[s.Field] + " " + s.Value }))
		for _, fix := range fe.Fixes {
			fmt.Println("fix:", fix)
		}
	}
	// Output:
	// Parallel=3 does not fit 2 GPUs with GPUsPerRun=1: use Parallel=2, or RunsPerGPU=2 with Parallel=4
	// --parallel 3 does not fit 2 GPUs with --gpus-per-run 1: use --parallel 2, or --runs-per-gpu 2 with --parallel 4
	// fix: [Parallel=2]
	// fix: [RunsPerGPU=2 Parallel=4]
}

// Heterogeneous runs: each run takes what it needs when it starts and gives
// it back when it ends. A run that does not fit now gets ErrBusy, so the
// caller waits; one that never fits gets ErrNeverFits.
func ExampleAllocator() {
	a := pack.NewAllocator(node)

	train, _ := a.Allocate(pack.Request{GPUs: 2, CPUs: 8})
	fmt.Println("train:", len(train.GPUs), "gpus, cpus", pack.FormatCPUList(train.CPUs))

	prep, _ := a.Allocate(pack.Request{CPUs: 4})
	fmt.Println("prep: cpus", pack.FormatCPUList(prep.CPUs))

	_, err := a.Allocate(pack.Request{GPUs: 1, CPUs: 2})
	fmt.Println("eval:", errors.Is(err, pack.ErrBusy))

	a.Release(train)
	eval, _ := a.Allocate(pack.Request{GPUs: 1, CPUs: 2})
	fmt.Println("eval after train: gpu", eval.GPUs[0].UUID, "cpus", pack.FormatCPUList(eval.CPUs))

	_, err = a.Allocate(pack.Request{GPUs: 3, CPUs: 1})
	fmt.Println(err)
	// Output:
	// train: 2 gpus, cpus 0-3,8-11
	// prep: cpus 4-5,12-13
	// eval: true
	// eval after train: gpu GPU-a cpus 0,8
	// allocate gpus=3 cpus=1: the node has 2 whole GPUs: never fits this node
}

func ExampleParseCPUList() {
	cpus, err := pack.ParseCPUList("0-3,8,10-11")
	fmt.Println(cpus, err)
	fmt.Println(pack.FormatCPUList(cpus))
	_, err = pack.ParseCPUList("0-3,x")
	fmt.Println(err)
	// Output:
	// [0 1 2 3 8 10 11] <nil>
	// 0-3,8,10-11
	// cpu list "0-3,x": bad entry "x"
}

// A mixed sweep: each run asks for what it needs, in the text form task
// files and flags use, and the queue starts them in order as they fit,
// letting small runs ahead of a big one that does not fit yet.
func ExampleQueue() {
	a := pack.NewAllocator(node)
	q := pack.NewQueue[string](a, time.Minute)
	for _, run := range []struct{ name, request string }{
		{"big-model", "gpus=2 cpus=8"},
		{"mlp-1", "gpus=0.5 cpus=2"},
		{"mlp-2", "gpus=0.5 cpus=2"},
		{"mlp-3", "gpus=0.5 cpus=2"},
		{"preprocess", "gpus=0 cpus=2"},
	} {
		r, err := pack.ParseRequest(run.request, pack.Request{}, 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		q.Push(run.name, r)
	}
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	var running []pack.Assignment
	for q.Len() > 0 {
		name, as, err := q.Next(now)
		if errors.Is(err, pack.ErrBusy) {
			fmt.Println("-- the first run ends")
			a.Release(running[0])
			running = running[1:]
			continue
		}
		fmt.Printf("%s: %s, gpus %v, cpus %s\n", name, as.Request.Class(), as.UUIDs(), pack.FormatCPUList(as.CPUs))
		running = append(running, as)
	}
	// Output:
	// big-model: 2 GPUs, gpus [GPU-a GPU-b], cpus 0-3,8-11
	// preprocess: CPU only, gpus [], cpus 4,12
	// -- the first run ends
	// mlp-1: 0.5 GPU, gpus [GPU-a], cpus 0,8
	// mlp-2: 0.5 GPU, gpus [GPU-a], cpus 1,9
	// mlp-3: 0.5 GPU, gpus [GPU-b], cpus 5,13
}
