package pack

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// WriteText writes the plan for a person: a table of its slots (GPUs,
// CPUs, NUMA node), what each run gets, and what stays idle.
func (p Plan) WriteText(w io.Writer) {
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
		cpus := FormatCPUList(s.CPUs)
		if s.SharedCPUs {
			cpus += " (shared)"
		}
		numa := "-"
		if s.NUMA >= 0 {
			numa = strconv.Itoa(s.NUMA)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Index, gpus, cpus, numa)
	}
	tw.Flush()
	fmt.Fprintf(w, "%s; each run: %s\n", plural(len(p.Slots), "slot"), p.Request.Describe(p.RunsPerGPU))
	if len(p.IdleGPUs) == 0 && len(p.IdleCPUs) == 0 {
		fmt.Fprintln(w, "idle: nothing")
		return
	}
	idle := make([]int, len(p.IdleGPUs))
	for i, g := range p.IdleGPUs {
		idle[i] = g.Index
	}
	fmt.Fprintf(w, "idle: gpus %s, cpus %s\n", cmp.Or(FormatCPUList(idle), "-"), cmp.Or(FormatCPUList(p.IdleCPUs), "-"))
}

// Describe says what a run asking for r gets, for people, with
// runsPerGPU runs sharing each GPU: "1 GPU (2 runs per GPU), 16 CPUs".
func (r Request) Describe(runsPerGPU int) string {
	var gpu string
	switch {
	case r.GPUs > 0 || !r.UsesGPU():
		gpu = plural(r.GPUs, "GPU")
	case r.GPUShare > 0 && r.GPUMem == 0 && runsPerGPU > 1 && GPUWhole/runsPerGPU == r.GPUShare:
		gpu = "1 GPU"
	default:
		gpu = r.Class()
	}
	if runsPerGPU > 1 {
		gpu += fmt.Sprintf(" (%d runs per GPU)", runsPerGPU)
	}
	cpus := plural(r.CPUs, "CPU")
	if r.CPUs == 0 {
		cpus = "1 shared CPU"
	}
	s := gpu + ", " + cpus
	if r.Mem > 0 {
		s += ", " + FormatSize(r.Mem) + " of memory"
	}
	return s
}
