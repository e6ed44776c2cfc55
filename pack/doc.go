// Package pack decides which GPUs and which CPUs each concurrent run on one
// node gets.
//
// The node is described by a [Topology]: the CPUs the process may use, with
// their core, socket and NUMA node, and the schedulable GPUs (whole GPUs or
// MIG devices) with their NUMA node and local CPUs. Callers build it from an
// inventory; pack never looks at the hardware.
//
// There are two ways in. An [Allocator] serves one [Request] at a time from a
// free pool, so one sweep can mix 1-GPU runs, 2-GPU runs and CPU-only runs: a
// run takes its [Assignment] when it starts and gives it back with
// [Allocator.Release] when it ends. A request that does not fit now fails
// with [ErrBusy] (wait for a run to end); one that can never fit on the node
// fails with [ErrNeverFits]. [NewPlan] is the static case: N identical
// requests, laid out once as a [Plan] of slots, with the defaults and the
// error messages the command line needs.
//
// Placement follows a few rules, each covered by a test:
//   - no CPU is given to two concurrent runs, except when a plan runs more
//     runs at once than there are CPUs and the caller did not fix the CPUs per
//     run (then runs share CPUs as evenly as possible, with a warning);
//   - a GPU is shared only by runs that asked for it with RunsPerGPU;
//   - a run's CPUs are whole cores (hyperthread siblings together) whenever
//     its CPU count allows, and are local to its GPUs' NUMA node when enough
//     local CPUs are free;
//   - the GPUs of a multi-GPU run come from one NUMA node, else one socket,
//     when possible;
//   - a MIG device is a unit of its own, at most one per run;
//   - the same topology and the same sequence of calls give the same
//     placements.
//
// Package pack is pure: it does no I/O, makes no system calls, starts no
// processes and sets no affinity. It imports only the standard library, so
// it builds without cgo.
package pack
