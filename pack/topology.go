package pack

import "fmt"

// Validate reports whether t can be allocated from: CPU ids are
// non-negative and listed once, GPU UUIDs are non-empty and listed once, and
// no physical GPU is listed both whole and as the parent of a MIG device
// (which would hand it out twice).
//
// CPUs in GPU.LocalCPUs that are not in t.CPUs are allowed: a restricted
// cpuset usually leaves some of a GPU's local CPUs out. They are ignored.
func (t Topology) Validate() error {
	seenCPU := make(map[int]bool, len(t.CPUs))
	for _, c := range t.CPUs {
		if c.ID < 0 {
			return fmt.Errorf("topology: cpu %d: negative id", c.ID)
		}
		if seenCPU[c.ID] {
			return fmt.Errorf("topology: cpu %d listed twice", c.ID)
		}
		seenCPU[c.ID] = true
	}
	seenGPU := make(map[string]bool, len(t.GPUs))
	whole := make(map[string]bool, len(t.GPUs))
	for i, g := range t.GPUs {
		if g.UUID == "" {
			return fmt.Errorf("topology: gpu %d (entry %d): empty uuid", g.Index, i)
		}
		if seenGPU[g.UUID] {
			return fmt.Errorf("topology: gpu %s listed twice", g.UUID)
		}
		seenGPU[g.UUID] = true
		if !g.MIG {
			whole[g.UUID] = true
		}
	}
	for _, g := range t.GPUs {
		if g.MIG && whole[g.Parent] {
			return fmt.Errorf("topology: gpu %s is listed whole and as the parent of MIG device %s", g.Parent, g.UUID)
		}
	}
	return nil
}
