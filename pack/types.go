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
}

// Topology is what one node gives the runs: the allowed CPUs and the
// schedulable GPUs. It is plain data; callers build it from an inventory.
// The zero Topology has no CPUs and no GPUs.
type Topology struct {
	CPUs []CPU
	GPUs []GPU
}

// Assignment is what one run gets: its GPUs, its CPUs (ascending) and the
// NUMA node they come from (-1 when unknown or mixed).
type Assignment struct {
	GPUs       []GPU
	CPUs       []int
	NUMA       int
	SharedGPUs bool // the GPUs were taken with runs per GPU > 1: other runs may use them at the same time
	SharedCPUs bool // a CPU also serves other concurrent runs (a plan with more runs than CPUs)
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
