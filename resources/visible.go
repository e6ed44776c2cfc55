package resources

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
)

// unit names one device: a whole GPU (mig < 0) or one MIG device of it.
type unit struct{ gpu, mig int }

// lookup finds the device one entry names, the way CUDA reads
// CUDA_VISIBLE_DEVICES: an integer is an NVML index in our own view,
// GPU-… is a GPU UUID or a unique prefix of one, MIG-… a MIG UUID or a
// unique prefix of one.
func lookup(gpus []GPU, entry string) (unit, error) {
	if n, err := strconv.Atoi(entry); err == nil {
		for i, g := range gpus {
			if g.Index == n {
				return unit{i, -1}, nil
			}
		}
		return unit{}, fmt.Errorf("no gpu with index %d", n)
	}
	var found []unit
	exact := false
	consider := func(id string, u unit) {
		switch {
		case id == entry:
			if !exact {
				found, exact = nil, true
			}
			found = append(found, u)
		case !exact && strings.HasPrefix(id, entry):
			found = append(found, u)
		}
	}
	switch {
	case strings.HasPrefix(entry, "GPU-"):
		for i, g := range gpus {
			consider(g.UUID, unit{i, -1})
		}
	case strings.HasPrefix(entry, "MIG-"):
		for i, g := range gpus {
			for j, m := range g.MIG {
				consider(m.UUID, unit{i, j})
			}
		}
	default:
		return unit{}, fmt.Errorf("not an index, GPU-uuid or MIG-uuid")
	}
	switch len(found) {
	case 0:
		return unit{}, fmt.Errorf("no such device")
	case 1:
		return found[0], nil
	}
	return unit{}, fmt.Errorf("prefix matches %d devices", len(found))
}

// keep returns the GPUs the units name, in NVML order. A GPU named by MIG
// entries only keeps just those MIG devices.
func keep(gpus []GPU, units []unit) []GPU {
	whole := make(map[int]bool)
	migs := make(map[int][]int)
	for _, u := range units {
		if u.mig < 0 {
			whole[u.gpu] = true
		} else {
			migs[u.gpu] = append(migs[u.gpu], u.mig)
		}
	}
	var out []GPU
	for i, g := range gpus {
		switch {
		case whole[i]:
			out = append(out, g)
		case len(migs[i]) > 0:
			slices.Sort(migs[i])
			g.MIG = make([]MIG, 0, len(migs[i]))
			for _, j := range slices.Compact(migs[i]) {
				g.MIG = append(g.MIG, gpus[i].MIG[j])
			}
			out = append(out, g)
		}
	}
	return out
}

// splitEntries splits a comma-separated device list, trimming spaces.
func splitEntries(list string) []string {
	entries := strings.Split(list, ",")
	for i := range entries {
		entries[i] = strings.TrimSpace(entries[i])
	}
	return entries
}

// visibleGPUs applies a CUDA_VISIBLE_DEVICES value to the GPUs NVML shows
// this process: only the devices it names stay. Like CUDA, it stops at the
// first entry that names no device and keeps what came before; the warning
// says so. An empty value means no GPUs. Entries naming a device twice are
// ignored with a warning.
func visibleGPUs(gpus []GPU, value string) ([]GPU, []string) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var units []unit
	var warnings []string
	seen := make(map[unit]bool)
	for _, e := range splitEntries(value) {
		u, err := lookup(gpus, e)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q: entry %q: %v: it and the entries after it are ignored, as CUDA does", value, e, err))
			break
		}
		if seen[u] {
			warnings = append(warnings, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q: entry %q names a device twice: ignored", value, e))
			continue
		}
		seen[u] = true
		units = append(units, u)
	}
	return keep(gpus, units), warnings
}

// opaqueGPUs turns device entries into GPUs nodepack cannot look into (no
// driver): each entry is handed to runs exactly as written. It stops at the
// first malformed entry; the error names it.
func opaqueGPUs(entries []string) ([]GPU, error) {
	var gpus []GPU
	seen := make(map[string]bool)
	for pos, e := range entries {
		g := GPU{Index: pos, UUID: e, NUMA: -1}
		if n, err := strconv.Atoi(e); err == nil && n >= 0 {
			g.Index = n
		} else if strings.HasPrefix(e, "MIG-") && len(e) > 4 {
			g.MIGEnabled, g.MIG = true, []MIG{{UUID: e}}
		} else if !strings.HasPrefix(e, "GPU-") || len(e) == 4 {
			return gpus, fmt.Errorf("bad entry %q", e)
		}
		if seen[e] {
			return gpus, fmt.Errorf("entry %q listed twice", e)
		}
		seen[e] = true
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// Select narrows n as the --cpus and --gpus flags ask; an empty list
// leaves that part alone.
func (n Node) Select(gpus, cpus string) (Node, error) {
	var err error
	if cpus != "" {
		if n, err = n.SelectCPUs(cpus); err != nil {
			return n, err
		}
	}
	if gpus != "" {
		n, err = n.SelectGPUs(gpus)
	}
	return n, err
}

// SelectGPUs narrows n to the GPUs a --gpus list names: "none" for no
// GPUs, or indices (ranges like 0-3 allowed), GPU-… and MIG-… ids. When n
// has no GPUs to choose from, the entries become opaque GPUs. Unlike
// CUDA_VISIBLE_DEVICES, any bad entry is an error that names it.
func (n Node) SelectGPUs(list string) (Node, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("gpus %q: %s", list, fmt.Sprintf(format, a...))
	}
	n.GPUSource = sourceFlag
	if strings.TrimSpace(list) == "none" {
		n.GPUs = nil
		return n, nil
	}
	var entries []string
	for _, e := range splitEntries(list) {
		if e == "" {
			return n, bad("empty entry")
		}
		if strings.Contains(e, "-") && !strings.HasPrefix(e, "GPU-") && !strings.HasPrefix(e, "MIG-") {
			// A range of indices reads like a cpu list range.
			indices, err := pack.ParseCPUList(e)
			if err != nil {
				return n, bad("bad entry %q", e)
			}
			for _, i := range indices {
				entries = append(entries, strconv.Itoa(i))
			}
			continue
		}
		entries = append(entries, e)
	}
	if len(n.GPUs) == 0 {
		gpus, err := opaqueGPUs(entries)
		if err != nil {
			return n, bad("%v", err)
		}
		n.GPUs = gpus
		return n, nil
	}
	var units []unit
	seen := make(map[unit]bool)
	for _, e := range entries {
		u, err := lookup(n.GPUs, e)
		if err != nil {
			return n, bad("entry %q: %v (this node has %s)", e, err, n.describeGPUs())
		}
		if seen[u] {
			return n, bad("entry %q names a device twice", e)
		}
		seen[u] = true
		units = append(units, u)
	}
	n.GPUs = keep(n.GPUs, units)
	return n, nil
}

func (n Node) describeGPUs() string {
	if len(n.GPUs) == 0 {
		return "no gpus"
	}
	idx := make([]int, len(n.GPUs))
	for i, g := range n.GPUs {
		idx[i] = g.Index
	}
	return "gpus " + pack.FormatCPUList(idx)
}

// SelectCPUs narrows n to the CPUs a --cpus list names (e.g. "0-7,16").
// Every CPU must be one n already allows; the error names the first that
// is not. The GPUs' local CPUs are narrowed to match.
func (n Node) SelectCPUs(list string) (Node, error) {
	ids, err := pack.ParseCPUList(strings.TrimSpace(list))
	if err != nil {
		return n, fmt.Errorf("cpus: %w", err)
	}
	if len(ids) == 0 {
		return n, fmt.Errorf("cpus %q: no cpus", list)
	}
	byID := make(map[int]CPU, len(n.CPUs))
	for _, c := range n.CPUs {
		byID[c.ID] = c
	}
	cpus := make([]CPU, 0, len(ids))
	for _, id := range ids {
		c, ok := byID[id]
		if !ok {
			return n, fmt.Errorf("cpus %q: cpu %d is not allowed here (allowed: %s)", list, id, pack.FormatCPUList(n.CPUIDs()))
		}
		cpus = append(cpus, c)
	}
	slices.SortFunc(cpus, func(a, b CPU) int { return a.ID - b.ID })
	n.CPUSource = sourceFlag
	n.CPUs = cpus
	n.GPUs = slices.Clone(n.GPUs)
	for i := range n.GPUs {
		n.GPUs[i].CPUs = intersect(n.GPUs[i].CPUs, n.CPUIDs())
	}
	return n, nil
}

// intersect returns the elements of a that are in b, in a's order.
func intersect(a, b []int) []int {
	out := []int{}
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
