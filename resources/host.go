package resources

import (
	"context"

	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/mem"
)

// This file is the only one that uses gopsutil. Its counts ignore the
// affinity mask, so it never decides which CPUs are allowed: it gives the
// model name and the node's physical memory only.

// hostFacts returns the CPU model name and total physical memory; either
// is empty or zero when gopsutil cannot tell.
func hostFacts(ctx context.Context) (model string, totalMemory uint64) {
	if infos, err := cpu.InfoWithContext(ctx); err == nil && len(infos) > 0 {
		model = infos[0].ModelName
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		totalMemory = vm.Total
	}
	return model, totalMemory
}
