// Package execute runs the processes of a sweep and keeps the node full:
// one loop carries out what the scheduling policy (package
// runner/schedule) decides — start run K in lane L on these GPUs and CPUs,
// retry it, drain, terminate — and tells it every start, settle, end and
// GPU fault; this package decides nothing about placement itself.
//
// Each run starts with its CPU affinity already in place, its GPUs in
// CUDA_VISIBLE_DEVICES, thread caps sized to its CPUs, a private TMPDIR, its
// own process group and its own directory with its logs. Runs come from a
// stream ([iter.Seq2] of [run.Run] and error), so a source of a million runs is
// never held in memory; package sweep makes such streams from the shapes
// users write sweeps in, and package runner adds the ledger that makes a
// sweep resumable.
//
// The package never logs, never exits and never installs signal handlers:
// [Execute] (or [Start] and [Execution.Wait]) reports through
// [Options.OnEvent] and the returned [Summary], and the caller decides what
// a signal means by cancelling the context (stop and terminate), calling
// [Execution.Kill] (kill at once) or [Execution.Drain] (start nothing
// more).
//
// # Processes
//
// Every process is started, waited for and stopped through package
// runner/proc: one handle per attempt, given a command, its CPUs, its
// memory limit and the attempt's key, never the scheduler's job. Its
// documentation says how runs start (pinned from their first
// instruction), what the first sweep sets up for the life of the process
// (spawner threads, the child subreaper and its sweeper) and what the
// supervisor of a program that calls proc.MaybeGuard does.
package execute
