// Command embed shows nodepack as a library inside another launcher: it
// builds a sweep of 20 runs in Go (a grid of parameters filling in one
// command, and probes with commands of their own, with requests of
// different sizes), runs it with everything the nodepack command wires
// (detection, placement, measuring, gpu_mem=auto, OOM classes, GPU
// faults), twice in one output directory — the second time nothing is
// left to do — then reads the results as Go values and names the best
// run. Its test runs it.
//
//	go run ./examples/embed [-o DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/sweep"
)

func main() {
	proc.MaybeGuard() // first: no run outlives this program, even after kill -9
	out := flag.String("o", "", "output directory (default: a temporary one)")
	flag.Parse()
	// SIGTERM, SIGINT and SIGHUP stop the sweep; sbatch --signal's SIGUSR1
	// stops it for a requeue. Every run gets SIGTERM, then SIGKILL.
	ctx, stop := nodepack.NotifyStop(context.Background(), nil)
	defer stop()
	if err := launch(ctx, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// train is the command every run of the grid fills in ({lr} and {seed};
// {{ and }} are literal braces): it reports one metrics line, a loss made
// from its learning rate and seed.
var train = []string{"sh", "-c", `awk -v lr="$1" -v seed="$2" 'BEGIN {{ printf "{{\"step\": 1, \"loss\": %.6f}}\n", (lr - 0.01) ^ 2 + seed / 1e4 }}' >>"$NODEPACK_METRICS"`, "sh", "{lr}", "{seed}"}

// mixedSweep is the sweep as Go values: four learning rates × four seeds,
// seed 0's runs on 2 CPUs, the others on one, and four probes that share
// a CPU (CPUs: 0).
func mixedSweep() []sweep.Entry {
	var runs []sweep.Entry
	for _, lr := range []float64{0.1, 0.03, 0.01, 0.003} {
		for seed := range 4 {
			run := sweep.Entry{Params: map[string]any{"lr": lr, "seed": seed}}
			if seed == 0 {
				run.Request = &pack.Request{CPUs: 2}
			}
			runs = append(runs, run)
		}
	}
	for i := range 4 {
		probe := []string{"sh", "-c", "echo probe " + strconv.Itoa(i) + " on cpu $NODEPACK_CPUS"}
		runs = append(runs, sweep.Entry{Command: probe, Request: &pack.Request{CPUs: 0}})
	}
	return runs
}

func launch(ctx context.Context, out string, w io.Writer) error {
	if out == "" {
		dir, err := os.MkdirTemp("", "nodepack-embed-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		out = dir
	}
	runs := mixedSweep()
	opts := nodepack.Options{Options: runner.Options{
		Output:  out,
		Execute: execute.Options{Policy: execute.Policy{Request: pack.Request{CPUs: 1}}},
		Source:  sweep.Spec{Command: train, Runs: runs},
	}}
	for round := 1; round <= 2; round++ {
		o, err := nodepack.Run(ctx, opts)
		if err != nil {
			return err
		}
		for _, note := range append(o.Warnings, o.Notes...) {
			fmt.Fprintln(w, "note:", note)
		}
		fmt.Fprintf(w, "round %d: %d ran, %d succeeded, %d failed, %d skipped as done before\n",
			round, o.Summary.Runs, o.Summary.Succeeded, o.Summary.Failed, o.Resumed.SkippedSucceeded)
	}
	table, err := results.Read(out, nil) // what ran: nodepack status --runs
	if err != nil {
		return err
	}
	best, bestLoss := -1, 0.0
	for i, row := range table.Rows {
		if loss, ok := row.Metric("loss"); ok && (best < 0 || loss < bestLoss) {
			best, bestLoss = i, loss
		}
	}
	if best < 0 {
		return fmt.Errorf("no run reported a loss")
	}
	lr, _ := table.Rows[best].Param("lr")
	seed, _ := table.Rows[best].Param("seed")
	fmt.Fprintf(w, "best of %d runs: lr=%v seed=%v loss=%g\n", len(table.Rows), lr, seed, bestLoss)
	return nil
}
