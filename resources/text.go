package resources

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/batch"
)

// WriteText writes the node for a person: the host and its batch job, the
// allowed CPUs, memory, and a table of the GPUs (nodepack detect).
func (n Node) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "host\t%s\t%s\n", n.Hostname, describeJob(n.Scheduler))
	sockets, cores, numas := map[int]bool{}, map[[2]int]bool{}, map[int]bool{}
	for _, c := range n.CPUs {
		sockets[c.Socket], cores[[2]int{c.Socket, c.Core}], numas[c.NUMA] = true, true, true
	}
	fmt.Fprintf(tw, "cpus\t%d allowed: %s\t%d cores, %d sockets, %d NUMA nodes  %s\n",
		len(n.CPUs), pack.FormatCPUList(n.CPUIDs()), len(cores), len(sockets), len(numas), n.CPUModel)
	memory := "total " + bytesText(n.Memory.TotalBytes)
	if m := n.Memory.CgroupLimitBytes; m > 0 {
		memory += ", cgroup limit " + bytesText(m)
	}
	if m := n.Memory.SlurmBytes; m > 0 {
		memory += ", slurm --mem " + bytesText(m)
	}
	fmt.Fprintf(tw, "memory\t%s usable\t%s\n", bytesText(n.MemoryBytes), memory)
	fmt.Fprintf(tw, "gpus\t%d\tsource: %s\n", len(n.GPUs), n.GPUSource)
	tw.Flush()
	if len(n.GPUs) == 0 {
		return
	}
	dash := func(s string) string { return cmp.Or(s, "-") }
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  INDEX\tUUID\tNAME\tMEMORY\tPCI BUS\tNUMA\tLOCAL CPUS\n")
	for _, g := range n.GPUs {
		numa := "-"
		if g.NUMA >= 0 {
			numa = fmt.Sprint(g.NUMA)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Index, g.UUID, dash(g.Name), bytesText(g.MemoryBytes),
			dash(g.PCIBusID), numa, dash(pack.FormatCPUList(g.CPUs)))
		for _, m := range g.MIG {
			fmt.Fprintf(tw, "  \t  %s\t(MIG)\t%s\t\t\t\n", m.UUID, bytesText(m.MemoryBytes))
		}
		if g.MIGEnabled && len(g.MIG) == 0 {
			fmt.Fprintf(tw, "  \t  MIG mode on, no MIG devices\t\t\t\t\t\n")
		}
	}
	tw.Flush()
}

// describeJob says which batch job this is, for a person.
func describeJob(s batch.Job) string {
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

// bytesText is b in GiB, or MiB below one; "-" for 0.
func bytesText(b uint64) string {
	const gib = 1 << 30
	switch {
	case b == 0:
		return "-"
	case b >= gib:
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}
