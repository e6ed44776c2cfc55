package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

const detectUsage = `Usage: nodepack detect [--json] [--inventory FILE] [--gpus LIST] [--cpus LIST]

Shows what this allocation gives nodepack: the CPUs this process may run on
(its affinity mask, which reflects Slurm cpusets and taskset) with their
cores, sockets and NUMA nodes; the GPUs NVML shows, narrowed by
CUDA_VISIBLE_DEVICES; memory limits; and the batch scheduler's job.

Examples:
  nodepack detect
  taskset -c 0-3 nodepack detect --gpus none
  nodepack detect --json > node.json      # save it, then on a login node:
  nodepack plan --inventory node.json --parallel 16 --runs-per-gpu 2`

type detectOptions struct {
	nodeOptions
	JSON bool
}

func runDetect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o detectOptions
	fs := pflag.NewFlagSet("detect", pflag.ContinueOnError)
	fs.BoolVar(&o.JSON, "json", false, "print the inventory as a JSON document (schema nodepack.node/v1)")
	o.nodeOptions.AddFlags(fs)
	if code, ok := parseFlags(ctx, fs, detectUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageErrorf(stderr, "detect", "unexpected argument %q", fs.Arg(0))
	}
	node, err := o.load(ctx)
	if err != nil {
		return usageErrorf(stderr, "detect", "%v", err)
	}
	printWarnings(stderr, node.Warnings)
	if o.JSON {
		if err := node.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "nodepack: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	node.WriteText(stdout)
	return exitOK
}

// printNotes writes informational lines, such as which shard this is.
func printNotes(w io.Writer, notes []string) {
	for _, s := range notes {
		fmt.Fprintf(w, "nodepack: %s\n", termSafe(s))
	}
}

func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintf(w, "nodepack: warning: %s\n", termSafe(s))
	}
}
