package execute_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/run"
)

func Example() {
	// One run at a time, placed nowhere. With a Topology (from
	// resources.Node.Topology) and a Request, or a Request per Run, each
	// run gets its own GPUs and pinned CPUs as it starts.
	runs := run.Runs(
		run.Run{ID: "hello", Args: []string{"echo", "hello"}},
		run.Run{ID: "fails", Args: []string{"sh", "-c", "echo oops >&2; exit 3"}},
	)
	sum, err := execute.Execute(context.Background(), runs, execute.Options{
		Policy: execute.Policy{
			Parallel: 1,
		},
		Process: execute.Process{
			Live: os.Stdout, // OutputDir would also keep runs/<id>/stdout.log and stderr.log
		},
		Hooks: execute.Hooks{
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Finished {
					fmt.Printf("%s: %s, exit %d\n", ev.Run.ID, ev.Reason, ev.ExitCode)
				}
			},
		},
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Printf("%d succeeded, %d failed\n", sum.Succeeded, sum.Failed)
	// Output:
	// [hello] hello
	// hello: ok, exit 0
	// [fails] oops
	// fails: failed, exit 3
	// 1 succeeded, 1 failed
}

// Runs that ask for different things share one node: a 2-GPU run, a
// 1-GPU run and four runs of a quarter of a GPU each start together on
// four GPUs, the quarters on one GPU with one CUDA_VISIBLE_DEVICES.
func Example_mixedRequests() {
	// This machine's CPUs, and four GPUs made up for the example; on a
	// GPU node, node.Topology() has the real ones.
	node, err := resources.Detect(context.Background(), resources.Options{GPUs: "none"})
	if err != nil {
		fmt.Println(err)
		return
	}
	topo := node.Topology()
	for i := range 4 {
		topo.GPUs = append(topo.GPUs, pack.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), NUMA: -1})
	}
	ask := func(text string) *pack.Request {
		r, err := pack.ParseRequest(text, pack.Request{}, 0)
		if err != nil {
			panic(err)
		}
		return &r
	}
	// Each run waits until all six have started, so that they are seen
	// side by side.
	dir, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	all := filepath.Join(dir, "all-started")
	wait := []string{"sh", "-c", `while [ ! -e "$1" ]; do sleep 0.01; done`, "sh", all}
	runs := []run.Run{
		{ID: "big", Args: wait, Request: ask("gpus=2 cpus=0")},
		{ID: "mlp-1", Args: wait, Request: ask("gpus=0.25 cpus=0")},
		{ID: "mlp-2", Args: wait, Request: ask("gpus=0.25 cpus=0")},
		{ID: "mlp-3", Args: wait, Request: ask("gpus=0.25 cpus=0")},
		{ID: "mlp-4", Args: wait, Request: ask("gpus=0.25 cpus=0")},
		{ID: "medium", Args: wait, Request: ask("gpus=1 cpus=0")},
	}
	var mu sync.Mutex
	got := map[string]string{}
	sum, err := execute.Execute(context.Background(), run.Runs(runs...), execute.Options{
		Policy: execute.Policy{
			Topology: topo,
			Parallel: len(runs),
		},
		Hooks: execute.Hooks{
			OnEvent: func(ev run.Event) {
				if ev.Kind != run.Started {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				got[ev.Run.ID] = fmt.Sprintf("%-17s CUDA_VISIBLE_DEVICES=%s", ev.Place.Request, strings.Join(ev.Place.UUIDs(), ","))
				if len(got) == len(runs) {
					os.WriteFile(all, nil, 0o644)
				}
			},
		},
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, r := range runs {
		fmt.Printf("%-6s %s\n", r.ID, got[r.ID])
	}
	fmt.Printf("%d succeeded\n", sum.Succeeded)
	// Output:
	// big    gpus=2 cpus=0     CUDA_VISIBLE_DEVICES=GPU-0,GPU-1
	// mlp-1  gpus=0.25 cpus=0  CUDA_VISIBLE_DEVICES=GPU-2
	// mlp-2  gpus=0.25 cpus=0  CUDA_VISIBLE_DEVICES=GPU-2
	// mlp-3  gpus=0.25 cpus=0  CUDA_VISIBLE_DEVICES=GPU-2
	// mlp-4  gpus=0.25 cpus=0  CUDA_VISIBLE_DEVICES=GPU-2
	// medium gpus=1 cpus=0     CUDA_VISIBLE_DEVICES=GPU-3
	// 6 succeeded
}
