//go:build linux

package proc

import (
	"hash/fnv"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The mark. A run may leave its process group (setsid) and clear its
// environment (env -i), and so shed both signs that tell its processes
// from others; it keeps its resource limits. Every run's processes carry
// a soft RLIMIT_RTTIME that names their nodepack and their run: 2^61 µs
// and more (over 70,000 years of real-time CPU without a blocking call, a
// limit no run reaches), plus 36 bits of the session token, plus 24 bits
// of the run's leader's pid (0 for the process-wide mark of
// ClaimChildren). A process with the session's mark is a run's, or its
// descendant's, whatever it did to its session and its environment: the
// sweeper kills an adopted one whose run has ended (pickTargets), nodepack
// those left when a sweep ends (killMarked), and the supervisor those left
// when nodepack dies (killSession).

// markBase is the least mark; runBits hold the run's leader's pid.
const (
	markBase = uint64(1) << 61
	runBits  = 24
	runMask  = uint64(1)<<runBits - 1
)

// sessionMark is the RLIMIT_RTTIME that marks the processes of the
// session token, with no run named.
func sessionMark(token string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(token))
	return markBase | h.Sum64()&(1<<36-1)<<runBits
}

// claimed says that the host program called ClaimChildren.
var claimed atomic.Bool

// ClaimChildren tells the runner that every process the program starts is
// one of its runs, or a helper it waits for (as in nodepack's own command;
// not in most programs that embed the runner, which start processes of
// their own that should outlive a sweep): the runner then
// marks the program itself, so that each run's process carries the mark
// (which finds a run's processes that left its process group and cleared
// their environment) from its first instruction. Without it each run is
// marked right after it starts, and what it forks in its first
// microseconds may escape. Call it first thing in main, after MaybeGuard.
func ClaimChildren() { claimed.Store(true) }

// markProcesses readies the mark of this process's session for markRun,
// and with ClaimChildren puts it on the process itself. Runs go unmarked
// where the hard limit is below the mark.
func markProcesses(token string) {
	var lim unix.Rlimit
	if unix.Prlimit(0, unix.RLIMIT_RTTIME, nil, &lim) != nil {
		return
	}
	mark := sessionMark(token)
	if lim.Max < mark {
		return // a site's hard limit: no mark
	}
	procs.mark = unix.Rlimit{Cur: mark, Max: lim.Max}
	if claimed.Load() && unix.Prlimit(0, unix.RLIMIT_RTTIME, &procs.mark, nil) == nil {
		procs.markedSelf = true
	}
}

// markRun marks a run's process just started with the session and the
// run: what it starts from now on can be told from other runs' (with
// ClaimChildren it carries the session's mark from its first instruction).
func markRun(pid int) {
	if procs.mark.Cur != 0 {
		lim := procs.mark
		lim.Cur |= uint64(pid) & runMask
		unix.Prlimit(pid, unix.RLIMIT_RTTIME, &lim, nil)
	}
}

// markOf returns the run that process pid's mark names (its leader's pid
// within runMask; 0 for none named), and whether it carries the mark of
// session at all.
func markOf(pid int, session uint64) (run int, ok bool) {
	var lim unix.Rlimit
	if session == 0 || unix.Prlimit(pid, unix.RLIMIT_RTTIME, nil, &lim) != nil || lim.Cur&^runMask != session {
		return 0, false
	}
	return int(lim.Cur & runMask), true
}

// marked reports whether process pid carries the mark of session.
func marked(pid int, session uint64) bool {
	_, ok := markOf(pid, session)
	return ok
}

// endedRunMark reports whether process pid carries this session's mark
// naming a run that has ended (procs.mu held): a leftover of an ended run
// that left its group and its environment. The run has ended once finish
// marked its group ended (before it kicks the sweeper, and before it reaps
// the leader), or once its leader is reaped.
func endedRunMark(pid int) bool {
	run, ok := markOf(pid, procs.mark.Cur)
	return ok && run != 0 && (procs.ended[run] || procs.leaders[run] == 0)
}

// killMarked kills and reaps the children of this process (a child
// subreaper: every orphan of a run's tree ends up one) that carry its
// mark, until none is left: what runs left behind when no run runs. It
// leaves run processes alone, and does nothing while a run runs (an
// orphan may be a running run's).
func killMarked() {
	if procs.mark.Cur == 0 {
		return
	}
	sup := procs.supervisor.pidOf()
	for range 100 {
		procs.starting.Lock()
		procs.mu.Lock()
		busy := len(procs.leaders) > 0
		procs.mu.Unlock()
		if busy {
			procs.starting.Unlock()
			return
		}
		children, ok := listChildren()
		if !ok {
			children = childrenByStat()
		}
		var killed []int
		for _, pid := range children {
			if pid != sup && marked(pid, procs.mark.Cur) {
				unix.Kill(pid, unix.SIGKILL)
				killed = append(killed, pid)
			}
		}
		procs.starting.Unlock()
		if len(killed) == 0 {
			return
		}
		for _, pid := range killed {
			reap(pid) // its children are ours now: look again
		}
	}
}

// childrenByStat lists this process's children from every process's
// stat, for a kernel without /proc/PID/task/TID/children.
func childrenByStat() []int {
	self := os.Getpid()
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var buf [512]byte
	var children []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if ppid, _, ok := readStat(pid, buf[:]); ok && ppid == self {
			children = append(children, pid)
		}
	}
	return children
}
