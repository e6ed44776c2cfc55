package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/resources/batch"
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
	printNode(stdout, node)
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

// printNode writes the human-readable inventory.
func printNode(w io.Writer, n resources.Node) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "host\t%s\t%s\n", n.Hostname, describeScheduler(n.Scheduler))

	sockets, cores, numas := map[int]bool{}, map[[2]int]bool{}, map[int]bool{}
	for _, c := range n.CPUs {
		sockets[c.Socket], cores[[2]int{c.Socket, c.Core}], numas[c.NUMA] = true, true, true
	}
	fmt.Fprintf(tw, "cpus\t%d allowed: %s\t%d cores, %d sockets, %d NUMA nodes  %s\n",
		len(n.CPUs), pack.FormatCPUList(n.CPUIDs()), len(cores), len(sockets), len(numas), n.CPUModel)
	fmt.Fprintf(tw, "memory\t%s usable\t%s\n", bytesString(n.MemoryBytes), describeMemory(n.Memory))
	fmt.Fprintf(tw, "gpus\t%d\tsource: %s\n", len(n.GPUs), n.GPUSource)
	tw.Flush()
	if len(n.GPUs) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  INDEX\tUUID\tNAME\tMEMORY\tPCI BUS\tNUMA\tLOCAL CPUS\n")
	for _, g := range n.GPUs {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Index, g.UUID, orDash(g.Name), bytesString(g.MemoryBytes),
			orDash(g.PCIBusID), numaString(g.NUMA), orDash(pack.FormatCPUList(g.CPUs)))
		for _, m := range g.MIG {
			fmt.Fprintf(tw, "  \t  %s\t(MIG)\t%s\t\t\t\n", m.UUID, bytesString(m.MemoryBytes))
		}
		if g.MIGEnabled && len(g.MIG) == 0 {
			fmt.Fprintf(tw, "  \t  MIG mode on, no MIG devices\t\t\t\t\t\n")
		}
	}
	tw.Flush()
}

func describeScheduler(s batch.Job) string {
	if !s.InJob() {
		return "no batch scheduler"
	}
	parts := []string{s.Kind + " job " + s.JobID}
	if s.Array != nil {
		parts = append(parts, fmt.Sprintf("array task %d of %d-%d", s.Array.Index, s.Array.Min, s.Array.Max))
	}
	if s.Tasks != nil {
		parts = append(parts, fmt.Sprintf("task %d of %d", s.Tasks.Rank, s.Tasks.Count))
	}
	if !s.EndTime.IsZero() {
		parts = append(parts, "ends "+s.EndTime.Local().Format("2006-01-02 15:04:05"))
	}
	return strings.Join(parts, ", ")
}

func describeMemory(m resources.Memory) string {
	parts := []string{"total " + bytesString(m.TotalBytes)}
	if m.CgroupLimitBytes > 0 {
		parts = append(parts, "cgroup limit "+bytesString(m.CgroupLimitBytes))
	}
	if m.SlurmBytes > 0 {
		parts = append(parts, "slurm --mem "+bytesString(m.SlurmBytes))
	}
	return strings.Join(parts, ", ")
}

func bytesString(b uint64) string {
	if b == 0 {
		return "-"
	}
	const gib = 1 << 30
	if b >= gib {
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func numaString(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
