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
// # How runs start (Linux)
//
// A run starts from the goroutine that runs it: the goroutine locks its
// OS thread, sets the thread's CPU mask to the run's CPUs, forks (the
// child inherits the mask from its first instruction), puts the mask back,
// and holds the thread until the run's process has exited, waiting for it
// in a blocking waitid. So a running run holds one thread, and the
// children's Pdeathsig (SIGKILL), which fires when the thread that forked
// them ends, fires only when the process itself dies: no goroutine of the
// program can take that thread and end it meanwhile. Runs beyond 64 at
// once (or twice the CPUs, if more) and runs in a memory cgroup of their
// own start from a spawner instead (below) and are waited for in Go's
// poller.
//
// With every P in a run's waitid, Go's sysmon takes a P back every 20 µs,
// on CPUs the runs need. A program that runs many short runs therefore
// gains from one P more than it has CPUs, as nodepack sets it:
// runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1).
//
// # Process-wide effects (Linux)
//
// The first call to [Execute] sets up, once for the life of the process:
//
//   - spawner goroutines, one per CPU up to 8, each locked to an OS thread
//     that never exits and stays pinned to the CPUs of the last run it
//     started. A pinned start goes to the spawner that its first CPU names
//     when that one is idle: its thread is then already on the CPU the
//     lane's last run left.
//   - PR_SET_CHILD_SUBREAPER on the process, so descendants that escape a
//     run's process group (setsid, double fork) are reparented to this
//     process instead of init, and a sweeper that kills and reaps them.
//
// The sweeper only touches processes that this process adopted and that it
// can tie to a run that has ended: a member of an ended run's process group,
// or a process whose environment names a run attempt (NODEPACK_RUN_ID and
// NODEPACK_ATTEMPT) that is no longer running. It reaps each one with a
// targeted wait4(pid), never wait4(-1), so other children of the process and
// their os/exec waits are left alone. A descendant that both leaves the
// process group and scrubs its environment still carries its run's mark (a
// soft RLIMIT_RTTIME that names the process's session, see
// [ClaimChildren]): adopted children with the mark are killed when an
// Execute ends and no run of the process runs. An escaped one that exits
// on its own before a sweep sees it stays a zombie until the process
// exits.
//
// # The supervisor (Linux)
//
// A program that calls [MaybeGuard] first thing in main lets the runner
// start one supervisor for the life of the process: a single exec of the
// program's own binary, in a process group of its own, told over a pipe
// which process groups the runs have. When the program dies, even by
// SIGKILL, the pipe ends: the supervisor kills every run's process group
// and every process whose environment carries the program's session
// (NODEPACK_SESSION, which every run gets and its descendants inherit,
// also after setsid or a double fork) or that carries its mark (which
// survives env -i too), removes the runs' scratch root, then exits. Runs
// themselves start directly, with no exec in between. Without the call a
// run's leader still dies with the program (Pdeathsig), and a normal end,
// a cancellation or Kill still leave nothing behind, but a run's
// descendants may outlive a SIGKILL of the program, and so may the
// scratch root until the next Execute on the node removes it.
//
// On other systems runs get their own environment and logs but no CPU
// affinity, no process group, no supervisor and no sweeping.
package execute
