package pack

// CPU is one logical CPU that the allocation may use.
//
// Core ids repeat across sockets (core 0 exists on every socket), so a
// physical core is identified by the pair (Socket, Core), never by Core alone.
type CPU struct {
	ID     int // logical CPU number as the kernel numbers it
	Core   int // core id, unique only within Socket
	Socket int // physical package id
	NUMA   int // NUMA node; -1 when unknown
}

// GPU is one schedulable GPU unit: a whole GPU or one MIG device.
//
// A MIG device is handed to exactly one run at a time and is never combined
// with other devices in one run.
type GPU struct {
	Index     int    // NVML index of the physical GPU (a MIG device carries its parent's)
	UUID      string // GPU-… or MIG-…; the value CUDA_VISIBLE_DEVICES gets
	NUMA      int    // NUMA node nearest the GPU; -1 when unknown
	LocalCPUs []int  // CPUs near the GPU, ascending; nil when unknown
	MIG       bool   // true for a MIG device
	Parent    string // for a MIG device, the UUID of its physical GPU

	// MemoryBytes is the device's memory (a MIG device's own); 0 when
	// unknown, and then no run can claim GPU memory on it.
	MemoryBytes uint64
}

// Topology is what one node gives the runs: the allowed CPUs, the
// schedulable GPUs and the memory runs may claim. It is plain data; callers
// build it from an inventory. The zero Topology has no CPUs, no GPUs and
// no memory.
type Topology struct {
	CPUs []CPU
	GPUs []GPU

	// Memory is the host memory the runs' Request.Mem may add up to, in
	// bytes: what the batch job may use. 0 when unknown, and then no run
	// can claim memory.
	Memory uint64
}

// GPUMemory is the GPU memory that runs sharing a GPU by memory may claim
// on the node's smallest GPU that reports its memory: its memory less
// [GPUMemHeadroom]. 0 when no GPU reports it.
func (t Topology) GPUMemory() uint64 {
	var least uint64
	for _, g := range t.GPUs {
		if g.MemoryBytes == 0 {
			continue
		}
		if m := g.MemoryBytes - min(GPUMemHeadroom(g.MemoryBytes), g.MemoryBytes); least == 0 || m < least {
			least = m
		}
	}
	return least
}

// Assignment is what one run gets: its GPUs, its CPUs (ascending) and the
// NUMA node they come from (-1 when unknown or mixed), for the Request it
// was allocated for.
type Assignment struct {
	GPUs       []GPU
	CPUs       []int
	NUMA       int
	SharedGPUs bool // the run shares its GPU: other runs may use it at the same time
	SharedCPUs bool // the run shares its CPU with other runs (Request.CPUs == 0)
	Request    Request
}

// UUIDs returns the UUIDs of the assignment's GPUs, in order.
func (a Assignment) UUIDs() []string {
	uuids := make([]string, len(a.GPUs))
	for i, g := range a.GPUs {
		uuids[i] = g.UUID
	}
	return uuids
}

// Slot is one of the concurrent places of a static plan: slot Index runs
// one run at a time with the same Assignment.
type Slot struct {
	Index int
	Assignment
}
