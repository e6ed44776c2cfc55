package resources

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/batch"
)

// Options changes what [Detect] looks at. The zero value detects the
// running system: the real root file system, the process environment, the
// process's affinity mask and NVML.
type Options struct {
	// Root is where sys/ and proc/ are read from; nil means os.DirFS("/").
	Root fs.FS
	// Getenv looks up environment variables; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
	// AllowedCPUs returns the CPUs the process may run on; nil means the
	// affinity mask (sched_getaffinity).
	AllowedCPUs func() ([]int, error)
	// GPUProbe lists the GPUs the driver shows, with warnings; nil means
	// NVML (no GPUs, with a warning, when NVML is not available).
	GPUProbe func() ([]GPU, []string)
	// GPUs and CPUs override detection as the --gpus and --cpus flags do
	// (see [Node.SelectGPUs] and [Node.SelectCPUs]); empty means detect.
	GPUs, CPUs string
}

// Detect finds what this allocation was given. Only an invalid --gpus or
// --cpus value, or an unreadable affinity mask, is an error: a missing
// driver, missing sysfs files or unreadable devices leave the node smaller
// and say why in Node.Warnings.
func Detect(ctx context.Context, o Options) (Node, error) {
	if o.Root == nil {
		o.Root = os.DirFS("/")
	}
	if o.Getenv == nil {
		o.Getenv = os.LookupEnv
	}
	if o.AllowedCPUs == nil {
		o.AllowedCPUs = affinityCPUs
	}
	root := o.Root
	if o.GPUProbe == nil {
		o.GPUProbe = func() ([]GPU, []string) { return probeNVML(root) }
	}

	n := Node{Schema: schema}
	n.Hostname, _ = os.Hostname()
	allowed, err := o.AllowedCPUs()
	if err != nil {
		return Node{}, fmt.Errorf("detect: %w", err)
	}
	cpus, warnings, err := readCPUs(o.Root, allowed)
	if err != nil {
		return Node{}, fmt.Errorf("detect: cpus: %w", err)
	}
	n.CPUs = cpus
	n.Warnings = append(n.Warnings, warnings...)

	n.CPUModel, n.Memory.TotalBytes, n.Memory.AvailableBytes = hostFacts(ctx)
	n.Memory.CgroupLimitBytes = cgroupMemoryLimit(o.Root)
	if v, ok := o.Getenv("SLURM_MEM_PER_NODE"); ok {
		if mb, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil && mb > 0 {
			n.Memory.SlurmBytes = mb << 20 // megabytes, as --mem takes them
		}
	}
	n.Scheduler = batch.Detect(o.Getenv)
	if strings.TrimSpace(o.CPUs) == "" {
		n.limitToSlots(o)
	}

	if strings.TrimSpace(o.GPUs) != "none" {
		n.detectGPUs(o)
	}
	if n, err = n.Select(o.GPUs, o.CPUs); err != nil {
		return Node{}, err
	}
	n.normalize()
	return n, nil
}

// limitToSlots cuts the CPUs to the count the batch system granted the
// job, when it bound the job to more (Grid Engine without -binding binds
// it to none): this host's slots in PE_HOSTFILE, else NSLOTS. It keeps
// whole cores, in the order of their first CPU, and says so in a warning:
// other jobs on the node may use the same CPUs.
func (n *Node) limitToSlots(o Options) {
	slots := n.Scheduler.Slots
	if n.Scheduler.Kind == batch.SGE {
		if file, ok := o.Getenv("PE_HOSTFILE"); ok {
			if here := peHostSlots(o.Root, file, n.Hostname); here > 0 {
				slots = here
			}
		}
	}
	if slots <= 0 || slots >= len(n.CPUs) {
		return
	}
	all := n.CPUIDs()
	n.CPUs = firstCores(n.CPUs, slots)
	n.CPUSource = sourceSlots
	slotWord, cpuWord := "slots", "CPUs"
	if slots == 1 {
		slotWord, cpuWord = "slot", "CPU"
	}
	n.Warnings = append(n.Warnings, fmt.Sprintf("Grid Engine granted %d %s, and the job may run on CPUs %s: runs use %s %s only, which other jobs on this node may use too; submit with -binding linear:%d to have Grid Engine choose cores of this job's own",
		slots, slotWord, pack.FormatCPUList(all), cpuWord, pack.FormatCPUList(n.CPUIDs()), slots))
}

// peHostSlots reads the slots of host in a Grid Engine PE_HOSTFILE (lines
// "host slots queue processors"; the host may be written in full); 0 when
// it is not there.
func peHostSlots(root fs.FS, file, host string) int {
	data, err := fs.ReadFile(root, strings.TrimPrefix(filepath.Clean(file), "/"))
	if err != nil {
		return 0
	}
	short := func(h string) string { h, _, _ = strings.Cut(h, "."); return h }
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) >= 2 && short(f[0]) == short(host) {
			if n, err := strconv.Atoi(f[1]); err == nil {
				return n
			}
		}
	}
	return 0
}

// firstCores returns n of cpus: whole cores (the CPUs of one socket and
// core id) in the order of their first CPU, the last one cut when n ends
// within it; ascending by id.
func firstCores(cpus []CPU, n int) []CPU {
	type core struct{ socket, id int }
	var order []core
	members := map[core][]CPU{}
	for _, c := range cpus {
		k := core{c.Socket, c.Core}
		if members[k] == nil {
			order = append(order, k)
		}
		members[k] = append(members[k], c)
	}
	var out []CPU
	for _, k := range order {
		for _, c := range members[k] {
			if len(out) < n {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b CPU) int { return a.ID - b.ID })
	return out
}

// detectGPUs fills in the GPUs: NVML's, narrowed by CUDA_VISIBLE_DEVICES;
// without a driver, CUDA_VISIBLE_DEVICES's entries as opaque GPUs.
func (n *Node) detectGPUs(o Options) {
	gpus, warnings := o.GPUProbe()
	n.Warnings = append(n.Warnings, warnings...)
	visible, set := o.Getenv("CUDA_VISIBLE_DEVICES")
	switch {
	case len(gpus) > 0:
		n.GPUSource = sourceNVML
		if set {
			gpus, warnings = visibleGPUs(gpus, visible)
			n.Warnings = append(n.Warnings, warnings...)
		}
	case set:
		n.GPUSource = sourceEnv
		if strings.TrimSpace(visible) != "" {
			var err error
			gpus, err = opaqueGPUs(splitEntries(visible))
			if err != nil {
				n.Warnings = append(n.Warnings, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q: %v: it and the entries after it are ignored, as CUDA does", visible, err))
			}
		}
	default:
		n.GPUSource = sourceNone
	}

	numaOf := make(map[int]int, len(n.CPUs))
	for _, c := range n.CPUs {
		numaOf[c.ID] = c.NUMA
	}
	allowed := n.CPUIDs()
	for i := range gpus {
		g := &gpus[i]
		// NVML and sysfs describe the whole node; runs can only use the
		// local CPUs this process is allowed.
		if g.CPUs != nil && g.NUMA < 0 {
			if numa, ok := numaOf[g.CPUs[0]]; ok {
				g.NUMA = numa
			}
		}
		g.CPUs = intersect(g.CPUs, allowed)
	}
	slices.SortStableFunc(gpus, func(a, b GPU) int { return a.Index - b.Index })
	n.GPUs = gpus
}
