// Command embed shows nodepack as a library inside another launcher: one
// call runs a resumable sweep on this node with everything the nodepack
// command wires (detection, placement, measuring, gpu_mem=auto, OOM
// classes, GPU faults), twice in one output directory — the second time
// nothing is left to do — then reads the results table. CI builds and
// runs it.
//
//	go run ./examples/embed [-o DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/sweep"
)

func main() {
	execute.MaybeGuard() // first: no run outlives this program, even after kill -9
	out := flag.String("o", "", "output directory (default: a temporary one)")
	flag.Parse()
	if err := launch(*out); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func launch(out string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if out == "" {
		dir, err := os.MkdirTemp("", "nodepack-embed-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		out = dir
	}
	// Six runs, three learning rates × two seeds as a Hydra sweep, each on
	// a CPU of its own except seed=2's, which share one: mixed requests.
	opts := nodepack.Options{Options: runner.Options{
		Output:  out,
		Execute: execute.Options{Request: pack.Request{CPUs: 1}},
		Source: sweep.Spec{Hydra: true, Command: []string{"sh", "-c", `echo "$1 $2 on cpus $NODEPACK_CPUS"`, "sh", "lr=0.1,0.01,0.001", "seed=1,2"},
			Requests: []string{"seed=2: cpus=0"}},
	}}
	for round := 1; round <= 2; round++ {
		o, err := nodepack.Run(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: %d ran, %d succeeded, %d failed, %d skipped as done before\n",
			round, o.Summary.Runs, o.Summary.Succeeded, o.Summary.Failed, o.Resumed.SkippedSucceeded)
	}
	table, err := results.Read(out, nil) // what ran: nodepack status --runs
	if err != nil {
		return err
	}
	for _, row := range table.Rows {
		fmt.Printf("lr=%s seed=%s %s\n", row.Params["lr"], row.Params["seed"], row.State)
	}
	return nil
}
