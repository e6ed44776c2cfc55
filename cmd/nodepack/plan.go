package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/nodepack/nodepack/pack"
	"github.com/spf13/pflag"
)

const planUsage = `Usage: nodepack plan [--inventory FILE] [--parallel N] [--gpus-per-run G | --runs-per-gpu K] [--cpus-per-run C] [--json]

Shows the first wave of a sweep without running anything: which GPUs and
CPUs each of the concurrent slots gets, and what stays idle. Without
--inventory it plans for this node.

By default there is one run per GPU (or MIG device), or one per physical
core on a node without GPUs, and the allowed CPUs are split evenly in whole
cores, local to each run's GPUs.

Examples:
  nodepack plan
  nodepack plan --inventory dgx.json --parallel 16 --runs-per-gpu 2
  nodepack plan --inventory dgx.json --gpus-per-run 2 --cpus-per-run 16 --json`

// packOptions are the flags that shape the slots; plan and run share them.
type packOptions struct {
	pack.Options
}

func (o *packOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.Parallel, "parallel", "j", 0, "runs at once (default: one per GPU or MIG device, else one per physical core)")
	fs.IntVar(&o.GPUsPerRun, "gpus-per-run", 0, "GPUs each run gets (default 1 when there are GPUs)")
	fs.IntVar(&o.RunsPerGPU, "runs-per-gpu", 0, "runs that share one GPU (default 1)")
	fs.IntVar(&o.CPUsPerRun, "cpus-per-run", 0, "CPUs each run gets (default: the allowed CPUs split evenly, whole cores first)")
}

type planOptions struct {
	nodeOptions
	packOptions
	JSON bool
}

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o planOptions
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	o.packOptions.AddFlags(fs)
	o.nodeOptions.AddFlags(fs)
	fs.BoolVar(&o.JSON, "json", false, "print the plan as a JSON document (schema nodepack.plan/v1)")
	if code, ok := parseFlags(fs, planUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageErrorf(stderr, "plan", "unexpected argument %q", fs.Arg(0))
	}
	node, err := o.load(ctx)
	if err != nil {
		return usageErrorf(stderr, "plan", "%v", err)
	}
	plan, err := pack.NewPlan(node.Topology(), o.Options)
	if err != nil {
		return usageErrorf(stderr, "plan", "%v", err)
	}
	printWarnings(stderr, plan.Warnings)
	if o.JSON {
		return writeJSON(stdout, stderr, planDocument(plan))
	}
	printPlan(stdout, plan)
	return exitOK
}

// planDoc is the stable JSON form of a plan (schema nodepack.plan/v1).
type planDoc struct {
	Schema   string     `json:"schema"`
	Request  requestDoc `json:"request"`
	Slots    []slotDoc  `json:"slots"`
	Idle     idleDoc    `json:"idle"`
	Warnings []string   `json:"warnings,omitempty"`
}

type requestDoc struct {
	GPUs       int `json:"gpus"`
	RunsPerGPU int `json:"runs_per_gpu"`
	CPUs       int `json:"cpus"`
}

type gpuRef struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
}

type slotDoc struct {
	Slot       int      `json:"slot"`
	GPUs       []gpuRef `json:"gpus"`
	CPUs       []int    `json:"cpus"`
	NUMA       int      `json:"numa"`
	SharedGPUs bool     `json:"shared_gpus,omitempty"`
	SharedCPUs bool     `json:"shared_cpus,omitempty"`
}

type idleDoc struct {
	GPUs []gpuRef `json:"gpus"`
	CPUs []int    `json:"cpus"`
}

func gpuRefs(gpus []pack.GPU) []gpuRef {
	refs := make([]gpuRef, len(gpus))
	for i, g := range gpus {
		refs[i] = gpuRef{Index: g.Index, UUID: g.UUID}
	}
	return refs
}

func orEmpty(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

func planDocument(p pack.Plan) planDoc {
	doc := planDoc{
		Schema:   "nodepack.plan/v1",
		Request:  requestDoc{GPUs: p.Request.GPUs, RunsPerGPU: max(p.Request.RunsPerGPU, 1), CPUs: p.Request.CPUs},
		Slots:    make([]slotDoc, len(p.Slots)),
		Idle:     idleDoc{GPUs: gpuRefs(p.IdleGPUs), CPUs: orEmpty(p.IdleCPUs)},
		Warnings: p.Warnings,
	}
	for i, s := range p.Slots {
		doc.Slots[i] = slotDoc{Slot: s.Slot, GPUs: gpuRefs(s.GPUs), CPUs: orEmpty(s.CPUs), NUMA: s.NUMA,
			SharedGPUs: s.SharedGPUs, SharedCPUs: s.SharedCPUs}
	}
	return doc
}

func printPlan(w io.Writer, p pack.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SLOT\tGPUS\tCPUS\tNUMA\n")
	for _, s := range p.Slots {
		gpus := "-"
		for i, g := range s.GPUs {
			if i == 0 {
				gpus = ""
			} else {
				gpus += ","
			}
			gpus += fmt.Sprintf("%d:%s", g.Index, g.UUID)
		}
		if s.SharedGPUs {
			gpus += " (shared)"
		}
		cpus := pack.FormatCPUList(s.CPUs)
		if s.SharedCPUs {
			cpus += " (shared)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Slot, gpus, cpus, numaString(s.NUMA))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d slots; each run: %d GPUs", len(p.Slots), p.Request.GPUs)
	if p.Request.RunsPerGPU > 1 {
		fmt.Fprintf(w, " (%d runs per GPU)", p.Request.RunsPerGPU)
	}
	fmt.Fprintf(w, ", %d CPUs\n", p.Request.CPUs)
	if len(p.IdleGPUs) == 0 && len(p.IdleCPUs) == 0 {
		fmt.Fprintln(w, "idle: nothing")
		return
	}
	idle := make([]int, len(p.IdleGPUs))
	for i, g := range p.IdleGPUs {
		idle[i] = g.Index
	}
	fmt.Fprintf(w, "idle: gpus %s, cpus %s\n", orDash(pack.FormatCPUList(idle)), orDash(pack.FormatCPUList(p.IdleCPUs)))
}

// writeJSON prints v indented; a failure to write is exit 1.
func writeJSON(stdout, stderr io.Writer, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		_, err = stdout.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodepack: %v\n", err)
		return exitFailed
	}
	return exitOK
}
