// Command embed shows nodepack as a library: it detects this node, plans
// one run per physical core (or per GPU), and runs a small sweep of its
// own making, printing each run as it finishes. CI builds and runs it.
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

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
)

func main() {
	// First: when nodepack's runner starts this binary as a run's guard
	// (the process that outlives nothing, even a kill -9 of this program),
	// it does that work and exits here.
	runner.MaybeGuard()
	out := flag.String("o", "", "log directory (default: a temporary one)")
	flag.Parse()
	if err := sweep(*out); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func sweep(out string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	node, err := resources.Detect(ctx, resources.Options{})
	if err != nil {
		return err
	}
	plan, err := pack.NewPlan(node.Topology(), pack.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d slots on CPUs %s, %d GPUs\n", node.Hostname, len(plan.Slots),
		pack.FormatCPUList(node.CPUIDs()), len(node.GPUs))

	// Six runs of a small sweep: three learning rates × two seeds, each
	// executed directly (no shell), with its parameters in its own argv.
	var runs []runner.Run
	for _, lr := range []string{"0.1", "0.01", "0.001"} {
		for _, seed := range []string{"1", "2"} {
			runs = append(runs, runner.Run{
				ID:   "lr" + lr + "-seed" + seed,
				Args: []string{"sh", "-c", `echo "lr=$1 seed=$2 on cpus $NODEPACK_CPUS"`, "sh", lr, seed},
			})
		}
	}
	if out == "" {
		if out, err = os.MkdirTemp("", "nodepack-embed-"); err != nil {
			return err
		}
		defer os.RemoveAll(out)
	}
	sum, err := runner.Execute(ctx, plan.Slots, runner.Runs(runs...), runner.Options{
		OutputDir: out,
		OnEvent: func(ev runner.Event) {
			if ev.Kind == runner.Finished {
				fmt.Printf("%-16s %-11s exit %d  slot %d  cpus %s\n", ev.Run.ID, ev.Reason, ev.ExitCode,
					ev.Slot.Index, pack.FormatCPUList(ev.Slot.CPUs))
			}
		},
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d runs, %d succeeded, %d failed in %v\n", sum.Runs, sum.Succeeded, sum.Failed, sum.Wall().Round(1e6))
	if sum.Failed > 0 {
		return fmt.Errorf("%d runs failed", sum.Failed)
	}
	return nil
}
