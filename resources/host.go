package resources

import (
	"context"

	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/mem"
	"github.com/shirou/gopsutil/v3/process"
)

// This file is the only one that uses gopsutil. Its counts ignore the
// affinity mask, so it never decides which CPUs are allowed: it gives the
// model name, the node's physical memory, and processes' resident memory
// for the usage sampler.

// hostFacts returns the CPU model name, and the total physical memory and
// what is available now (MemAvailable); each is empty or zero when
// gopsutil cannot tell.
func hostFacts(ctx context.Context) (model string, totalMemory, available uint64) {
	if infos, err := cpu.InfoWithContext(ctx); err == nil && len(infos) > 0 {
		model = infos[0].ModelName
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		totalMemory, available = vm.Total, vm.Available
	}
	return model, totalMemory, available
}

// processRSS returns a process's resident set size in bytes; 0 if it is
// gone.
func processRSS(pid int) uint64 {
	p := process.Process{Pid: int32(pid)}
	m, err := p.MemoryInfo()
	if err != nil {
		return 0
	}
	return m.RSS
}
