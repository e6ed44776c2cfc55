// Package pack decides which GPUs, CPUs and memory each concurrent run on
// one node gets.
//
// The node is described by a [Topology]: the CPUs the process may use, with
// their core, socket and NUMA node, the schedulable GPUs (whole GPUs or MIG
// devices) with their NUMA node, local CPUs and memory, and the host memory
// the runs may claim. Callers build it from an inventory; pack never looks
// at the hardware.
//
// Each run asks for what it needs with a [Request]: GPUs of its own, or a
// share of one GPU (a fraction, or an amount of GPU memory), CPUs of its
// own or one shared CPU, and host memory. [ParseRequest] reads the text
// form ("gpus=2 cpus=16", "gpus=0.25", "gpu_mem=12GiB cpus=4") that task
// files, parameter files and flags use.
//
// There are three ways in. An [Allocator] serves one request at a time
// from a free pool, so one sweep can mix 2-GPU runs, quarter-GPU runs and
// CPU-only runs: a run takes its [Assignment] when it starts and gives it
// back with [Allocator.Release] when it ends. A request that does not fit
// now fails with [ErrBusy] (wait for a run to end); one that can never fit
// on the node fails with [ErrNeverFits]. A [Queue] keeps the runs waiting
// for an Allocator in input order and lets smaller runs start ahead of a
// larger one that does not fit yet, for a bounded time. [NewPlan] is the
// uniform case the command line starts from: the defaults and error
// messages of its flags, and the first wave of N runs of one request.
//
// Placement follows a few rules, each covered by a test:
//   - no CPU is given to two concurrent runs, except to runs that asked to
//     share one (Request.CPUs 0): those get the least loaded CPU no run has
//     to itself;
//   - a GPU that a run has to itself serves no other run; runs share a GPU
//     while their shares add up to at most one GPU and their GPU memory
//     (a share claims its part of the memory) fits the GPU's memory less a
//     headroom ([GPUMemHeadroom]); a run is never spread over two GPUs;
//   - runs start only while their host memory fits the topology's Memory;
//   - a run's CPUs are whole cores (hyperthread siblings together) whenever
//     its CPU count allows, and are local to its GPUs' NUMA node when enough
//     local CPUs are free;
//   - the GPUs of a multi-GPU run come from one NUMA node when some NUMA
//     node has that many GPUs, else from one socket when some socket has,
//     else from anywhere; a run that could have them close together waits
//     for them rather than take GPUs apart that happen to be free (GPU
//     interconnects such as NVLink are not in the topology: NUMA node and
//     socket stand for closeness); runs sharing GPUs fill a GPU already in
//     use before taking another, keeping whole GPUs (and NUMA nodes) free
//     for multi-GPU runs;
//   - a MIG device is a unit of its own, at most one per run;
//   - the same topology and the same sequence of calls give the same
//     placements.
//
// Package pack is pure: it does no I/O, makes no system calls, starts no
// processes, sets no affinity and reads no clock. It imports only the
// standard library, so it builds without cgo.
package pack
