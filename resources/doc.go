// Package resources describes what this node gives nodepack: the CPUs the
// process may run on (with their core, socket and NUMA node), the GPUs and
// MIG devices it may hand out, memory limits and the batch scheduler's view
// of the job.
//
// Everything is returned as plain values ([Node]) that can be saved as JSON
// and read back ([ReadInventory]) to plan for another node. Detection reads
// sysfs and procfs through an injectable file system so tests use fixture
// trees. NVML is touched in exactly one file (built only with cgo on Linux)
// and gopsutil in exactly one other; a missing driver means zero GPUs, never
// an error or a crash.
//
// The package never logs and never exits: problems that do not stop
// detection are returned in [Node.Warnings].
package resources
