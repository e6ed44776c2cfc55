// Command embed shows nodepack as a library inside another launcher: it
// detects this node, plans one run per physical core (or per GPU), and
// runs a small resumable sweep of its own making, with mixed requests,
// twice in one output directory — the second time nothing is left to do —
// then reads its results table and writes its HTML report. CI builds and
// runs it.
//
//	go run ./examples/embed [-o DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/report"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

func main() {
	// First: when nodepack's runner starts this binary as its supervisor
	// (the process that sees to it that no run outlives this program, even
	// after a kill -9), it does that work and exits here.
	execute.MaybeGuard()
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
	if out == "" {
		if out, err = os.MkdirTemp("", "nodepack-embed-"); err != nil {
			return err
		}
		defer os.RemoveAll(out)
	}

	// Six runs: three learning rates × two seeds, as a Hydra sweep of a
	// command executed directly (no shell), each with its own parameters.
	// Each run asks for the plan's request, except those with seed=2,
	// which ask for one CPU shared with other such runs: mixed requests,
	// packed onto the node as runs start and end.
	opts := runner.Options{
		Source: sweep.Spec{Hydra: true, Command: []string{"sh", "-c", `echo "$1 $2 on cpus $NODEPACK_CPUS"`, "sh", "lr=0.1,0.01,0.001", "seed=1,2"},
			Requests: []string{"seed=2: gpus=0 cpus=0"}},
		Output: out,
		Job:    batch.Detect(os.LookupEnv),
		Plan:   plan,
		Execute: execute.Options{
			Topology: node.Topology(),
			Request:  plan.Request,
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Finished {
					fmt.Printf("%-20s %-11s exit %d  %-16s cpus %s\n", ev.Run.Name, ev.Reason, ev.ExitCode,
						ev.Place.Request, pack.FormatCPUList(ev.Place.CPUs))
				}
			}},
	}
	for round := 1; round <= 2; round++ {
		sw, err := runner.Prepare(opts)
		if err != nil {
			return err
		}
		session, err := sw.Start(ctx)
		if err != nil {
			sw.Close()
			return err
		}
		outcome := session.Wait()
		sw.Close()
		sum := outcome.Summary
		fmt.Printf("round %d: %d runs ran, %d succeeded, %d failed, %d skipped as done before, in %v\n", round,
			sum.Runs, sum.Succeeded, sum.Failed, outcome.Resumed.SkippedSucceeded, sum.Wall().Round(1e6))
		if err := errors.Join(outcome.Err, outcome.LedgerErr, outcome.Problem); err != nil {
			return err
		}
		if sum.Failed > 0 {
			return fmt.Errorf("%d runs failed", sum.Failed)
		}
	}

	// What ran, as a table (nodepack status --runs) and as a page
	// (nodepack report): each run's parameters come from the sweep.
	table, err := results.Read(out, nil)
	if err != nil {
		return err
	}
	for _, row := range table.Rows {
		fmt.Printf("%s lr=%s seed=%s %s in %.3f s\n", row.ID, row.Params["lr"], row.Params["seed"], row.State, row.Seconds)
	}
	page, err := os.Create(filepath.Join(out, "report.html"))
	if err != nil {
		return err
	}
	written, err := report.Write(page, out, report.Options{})
	if err := errors.Join(err, page.Close()); err != nil {
		return err
	}
	fmt.Printf("report: %d runs, %d attempts, %d bytes\n", written.Runs, written.Attempts, written.Bytes)
	return nil
}
