// Package proc starts, waits for and stops the process tree of one
// attempt of a run, and leaves none of it behind: the process is pinned to
// its CPUs from its first instruction, starts in a process group of its
// own (and, with a memory limit, a memory cgroup of its own), dies with
// the program (Pdeathsig, and after MaybeGuard a supervisor that kills its
// whole tree even when the program is killed with SIGKILL), and what it
// leaves when it ends (a group member, a process that left its group with
// setsid or cleared its environment) is killed and reaped by the
// sweeper, this process being their subreaper.
//
// A [Process] is one handle: [Launch] starts it from a [Spec], [Process.Wait]
// waits for it and returns its [Exit], [Process.Stop] stops it by a
// [Ladder] (a checkpoint signal, SIGTERM, SIGKILL), [Process.Signal]
// signals its group. A [Set] holds the live ones, to stop them all at
// once. The handle never sees why a process runs: it knows a command, its
// CPUs, its memory limit and a [Key] naming the attempt, and returns how
// the process ended. A run's non-zero exit is data in its Exit, not an
// error.
//
// The package changes the program's process: it becomes a child
// subreaper (orphans of its runs are reparented to it, and it reaps
// them), it keeps a few threads of its own, and with MaybeGuard it starts
// one supervisor process. On systems other than Linux a process gets no
// CPU affinity, no process group and no sweeping: only it is signalled.
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
// The first [Launch] (or [Setup]) sets up, once for the life of the process:
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
// [ClaimChildren]): adopted children with the mark are killed by [SweepAll] (a sweep's end) when no run of the process runs. An escaped one that exits
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
// scratch root until the next [MakeScratch] on the node removes it.
package proc

// SessionVar names, in every run's environment, the nodepack processes the
// run descends from: their session tokens ([Session]), outermost first,
// separated by colons (a run may itself run nodepack). The supervisor that
// cleans up after a program killed with SIGKILL finds the run's
// descendants by it.
const SessionVar = "NODEPACK_SESSION"

// knobs force the paths Launch takes and the sweeper's way of finding
// children, for the tests of every path (see SetKnobs).
var knobs Knobs

// Knobs force how processes start and how leftovers are found, for tests
// (of this package and of those that start runs through it) to go through
// each path one machine would take only under some conditions. The zero
// Knobs is the normal behaviour.
type Knobs struct {
	// Unsupervised: as in a program that did not call MaybeGuard.
	Unsupervised bool
	// Spawner: every process starts from a spawner thread and is waited
	// for in the poller, as those in a memory cgroup and those beyond the
	// ones started directly do.
	Spawner bool
	// NoChildrenFiles: the sweeper finds the program's children by every
	// process's stat, as on a kernel without /proc/PID/task/TID/children.
	NoChildrenFiles bool
}

// SetKnobs sets k until restore is called, which puts back the knobs
// before. Not for use while processes are launched or swept.
func SetKnobs(k Knobs) (restore func()) {
	saved := knobs
	knobs = k
	applyKnobs()
	return func() {
		knobs = saved
		applyKnobs()
	}
}
