//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// procs is the process-wide machinery, set up once by setup: the spawner
// thread, the child-subreaper bit, and what the sweeper needs to tell a run's
// leftovers from other children of the process.
var procs struct {
	once  sync.Once
	err   error
	spawn chan spawnRequest   // any spawner
	near  []chan spawnRequest // one spawner's own: see spawn
	// spawnerTIDs are the spawners' threads, which stay pinned to the
	// CPUs of the last run each started.
	spawnerTIDs []int
	kick        chan struct{}      // asks for a sweep soon; coalesces
	now         chan chan struct{} // asks for a complete sweep; closed when done

	// token is this process's session token (see SessionVar), and
	// supervisor the process that cleans up after it: nil when the host
	// program did not call MaybeGuard.
	token      string
	supervisor *supervisor
	guard      *supervisor // the one started, which Knobs.Unsupervised hides

	// mark is the RLIMIT_RTTIME that marks this session's runs (see
	// sessionMark); zero Cur when they are not marked. markedSelf says
	// the process itself carries it (ClaimChildren).
	mark       unix.Rlimit
	markedSelf bool

	// all is the CPU mask of the thread that ran setup: the process's own,
	// which a run that asks for no CPUs gets.
	all unix.CPUSet

	// self is this process's own attempt, when it is itself a nodepack run;
	// its other children inherit that marker and are not ours to sweep.
	self Key

	// starting is held for reading by every start in flight, from before
	// its fork until its process is registered, and for writing while the
	// sweeper decides which children are leftovers: a child forked and not
	// yet registered must not look like one.
	starting sync.RWMutex
	mu       sync.Mutex   // guards the maps
	leaders  map[int]int  // pid → count: started run processes not yet reaped
	running  map[Key]int  // attempts whose process has not exited
	ended    map[int]bool // process groups of ended runs that may still have members
}

// Setup readies the process-wide machinery once: the child-subreaper bit,
// the spawner threads, the sweeper, the session's mark and, after
// MaybeGuard, the supervisor. Launch calls it; call it first to learn
// early that it cannot work. Later calls return the first one's error.
func Setup() error {
	procs.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			procs.err = fmt.Errorf("child subreaper: %w", err)
			return
		}
		if err := unix.SchedGetaffinity(0, &procs.all); err != nil {
			procs.err = fmt.Errorf("affinity: %w", err)
			return
		}
		procs.leaders = make(map[int]int)
		procs.running = make(map[Key]int)
		procs.ended = make(map[int]bool)
		procs.self.Run = os.Getenv("NODEPACK_RUN_ID")
		procs.self.Attempt, _ = strconv.Atoi(os.Getenv("NODEPACK_ATTEMPT"))
		procs.token = newSessionToken()
		markProcesses(procs.token) // before the supervisor: it may carry the mark
		if supervisorEnabled.Load() {
			if procs.guard, procs.err = startSupervisor(procs.token); procs.err != nil {
				return
			}
			procs.supervisor = procs.guard
		}
		procs.spawn = make(chan spawnRequest)
		procs.kick = make(chan struct{}, 1)
		procs.now = make(chan chan struct{})
		ready := make(chan error)
		for range spawners {
			own := make(chan spawnRequest)
			procs.near = append(procs.near, own)
			go spawner(own, ready)
			if procs.err = <-ready; procs.err != nil {
				return
			}
		}
		go sweeper()
	})
	return procs.err
}

type spawnRequest struct {
	cmd   *exec.Cmd
	cpus  []int
	group *cgroup // the memory cgroup to start it in; nil for none
	key   Key
	guard string // Spec.Guard
	done  chan error
}

// spawners is how many spawner threads start runs. A start keeps its
// thread until the child has exec'd (Go's fork waits for that), a good
// part of a millisecond on a busy node: with one thread, the starts of
// several slots would queue behind each other.
var spawners = min(max(runtime.NumCPU(), 2), 8)

// spawner starts runs, one at a time. It owns an OS thread for the life of the
// process: it sets that thread's CPU mask to the run's CPUs and starts the
// child from it (clone inherits the calling thread's mask, so the child's
// first instruction is already pinned). Setting the mask by pid after the
// start would race with the child's early threads. The thread does nothing
// else, so its mask stays as the last run left it, and is set only when the
// next run asks for another. Because the thread never exits, Pdeathsig
// fires only when the whole process dies.
func spawner(own <-chan spawnRequest, ready chan<- error) {
	runtime.LockOSThread() // never unlocked
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		ready <- fmt.Errorf("spawner: affinity: %w", err)
		select {} // keep the thread: an exiting locked thread is destroyed
	}
	all := mask
	t := spawnThread{tid: unix.Gettid(), mask: mask, all: all}
	procs.spawnerTIDs = append(procs.spawnerTIDs, t.tid) // setup waits for ready
	ready <- nil
	for {
		var req spawnRequest
		select {
		case req = <-own:
		case req = <-procs.spawn:
		}
		req.done <- t.spawnOne(req)
	}
}

// spawnThread is what a spawner knows of its own thread.
type spawnThread struct {
	tid       int
	mask, all unix.CPUSet
	// in is the memory cgroup the thread is in: nil for this process's
	// own, or a run's when the move back after its start failed.
	in *cgroup
}

// spawnOne starts one command with the CPU mask it asks for (all of them
// when it asks for none), in the memory cgroup it asks for (this process's
// own when none), from the spawner's thread. A *StartError means the
// command could not start; another error means the mask or the cgroup
// could not be set.
func (t *spawnThread) spawnOne(req spawnRequest) error {
	want := t.all
	if len(req.cpus) > 0 {
		want.Zero()
		for _, c := range req.cpus {
			if c >= len(want)*64 { // unix.CPUSet holds 1024 CPUs
				return fmt.Errorf("affinity: cpu %d: beyond %d", c, len(want)*64)
			}
			want.Set(c)
		}
	}
	if want != t.mask {
		if err := unix.SchedSetaffinity(0, &want); err != nil {
			t.mask = unix.CPUSet{} // unknown: set it next time
			return fmt.Errorf("affinity %s: %w", pack.FormatCPUList(req.cpus), err)
		}
		t.mask = want
	}
	if t.in != nil && t.in != req.group {
		if err := moveThread(t.in.m.home, t.tid); err != nil {
			return err
		}
		t.in = nil
	}
	if req.group != nil && t.in == nil {
		if err := moveThread(req.group.tasks, t.tid); err != nil {
			return err
		}
		t.in = req.group
		defer func() {
			if moveThread(req.group.m.home, t.tid) == nil {
				t.in = nil
			}
		}()
	}
	procs.starting.RLock()
	defer procs.starting.RUnlock()
	// The attempt counts as running before its process exists: its child,
	// once exec'd, carries the attempt in its environment, and must not
	// look like an ended attempt's leftover.
	procs.mu.Lock()
	procs.running[req.key]++
	procs.mu.Unlock()
	if err := req.cmd.Start(); err != nil {
		procs.mu.Lock()
		if procs.running[req.key]--; procs.running[req.key] <= 0 {
			delete(procs.running, req.key)
		}
		procs.mu.Unlock()
		return &StartError{err}
	}
	pid := req.cmd.Process.Pid
	markRun(pid)
	procs.supervisor.started(pid, req.guard)
	procs.mu.Lock()
	procs.leaders[pid]++
	delete(procs.ended, pid) // the number was free, so that old group is empty
	procs.mu.Unlock()
	return nil
}

// Process is one started process tree: a run's attempt (Launch) or a
// helper of the program's own (LaunchHelper). Its methods other than Wait
// may be called from any goroutine.
type Process struct {
	cmd    *exec.Cmd
	key    Key
	pid    int           // the process, also its process group id
	pidfd  int           // a pidfd for pid, or -1
	exited chan struct{} // closed once pid has exited (it is not reaped yet)
	// direct says the process was started from the calling goroutine's
	// own thread, which that goroutine holds until Wait (see Launch);
	// otherwise a spawner started it and watch waits.
	direct bool
	group  *cgroup // its memory cgroup; nil for none
	onExit func()  // Spec.Exited
	helper *helper // a helper's keeper; nil for a run

	stopOnce sync.Once
	sigMu    sync.Mutex
	reaped   bool // its pid is being reaped: its number may be reused
}

// directLimit is how many runs at once start from, and are waited for on,
// their own goroutine's thread; the runs beyond it start from a spawner
// and are waited for in Go's poller, so that --parallel 100000 does not
// hold 100,000 threads (each counts against a cgroup's pids.max too).
// Twice the CPUs covers runs that keep the node busy.
var directLimit = int64(max(64, 2*runtime.NumCPU()))

// directRuns counts the processes started directly that have not exited.
var directRuns atomic.Int64

// Launch starts s.Cmd in a process group of its own, pinned to s.CPUs
// from its first instruction, killed if the program dies (Pdeathsig; with
// MaybeGuard, its whole tree by the supervisor), and, with s.MemLimit, in
// a memory cgroup of its own. A *StartError means the command could not
// start (the run's failure); any other error means the runner could not
// set it up. The goroutine that called Launch must call Wait.
//
// Most processes start directly: the calling goroutine locks its OS
// thread, sets the thread's CPU mask to the run's CPUs, forks (the child
// inherits the mask from its first instruction), puts the mask back, and
// keeps the thread until the process has exited, waiting for that in a
// blocking waitid. Holding the thread is what makes Pdeathsig safe: it
// fires when the thread that forked the child ends, and a thread another
// goroutine locked could end with that goroutine. Compared with handing
// the start to a spawner thread and waiting in the poller, this saves
// several thread hand-offs per run: BenchmarkThroughput/bash, 2 CPUs, 800
// µs a run instead of 990 (median of 8). Processes in a memory cgroup, and
// those beyond directLimit, still go through a spawner.
func Launch(s Spec) (*Process, error) {
	if err := Setup(); err != nil {
		return nil, err
	}
	var group *cgroup
	if s.Cgroups != nil && s.MemLimit > 0 {
		var err error
		if group, err = s.Cgroups.make(s.MemLimit); err != nil {
			return nil, err
		}
	}
	cmd := s.Cmd
	pidfd := -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &pidfd}
	p := &Process{cmd: cmd, key: s.Key, pidfd: -1, exited: make(chan struct{}), group: group, onExit: s.Exited}
	if group == nil && !knobs.Spawner && directRuns.Add(1) <= directLimit {
		runtime.LockOSThread()
		if err := startHere(cmd, s.CPUs, s.Key, s.Guard); err != nil {
			runtime.UnlockOSThread()
			directRuns.Add(-1)
			return nil, err
		}
		p.direct = true
	} else {
		if group == nil && !knobs.Spawner {
			directRuns.Add(-1)
		}
		if err := spawn(cmd, s.CPUs, group, s.Key, s.Guard); err != nil {
			if group != nil {
				group.remove()
			}
			return nil, err
		}
	}
	p.pid, p.pidfd = cmd.Process.Pid, pidfd
	if !p.direct {
		go p.watch()
	}
	return p, nil
}

// startHere starts cmd from the calling goroutine's thread, which it has
// locked, with the CPU mask the run asks for, and puts the thread's own
// mask back.
func startHere(cmd *exec.Cmd, cpus []int, key Key, guard string) error {
	t := spawnThread{tid: unix.Gettid(), all: procs.all}
	// The thread's own mask, read rather than assumed: another goroutine
	// may have left this thread pinned.
	if err := unix.SchedGetaffinity(0, &t.mask); err != nil {
		return fmt.Errorf("affinity: %w", err)
	}
	own := t.mask
	err := t.spawnOne(spawnRequest{cmd: cmd, cpus: cpus, key: key, guard: guard})
	if t.mask != own {
		if err := unix.SchedSetaffinity(0, &own); err != nil {
			// The thread stays pinned: let it end with this goroutine
			// rather than go back to run others (its run, if it started,
			// has been reaped by then).
			runtime.LockOSThread()
		}
	}
	return err
}

// Wait waits for the process to exit, calls Spec.Exited, kills what is
// left of its group, has the sweeper collect its escaped descendants,
// reaps it, removes its memory cgroup, and says how it ended. A launched
// process must be waited for on the goroutine that launched it: that
// goroutine may hold the thread it was forked from.
func (p *Process) Wait() Exit {
	if p.helper != nil {
		return p.helper.wait()
	}
	p.waitExited()
	if p.onExit != nil {
		p.onExit()
	}
	exit := p.reap()
	if p.group != nil {
		exit.OOMKills = p.group.oomKills()
		p.group.remove()
	}
	return exit
}

// waitExited returns once the run's process has exited; it leaves it
// unreaped. A directly started process is waited for here, in a blocking
// waitid on the thread that forked it, which is then let go.
func (p *Process) waitExited() {
	if !p.direct {
		<-p.exited
		return
	}
	waitNoReap(p.pid, p.pidfd)
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
	}
	close(p.exited)
	// Exited, the process has no use for Pdeathsig: the thread may go.
	runtime.UnlockOSThread()
	directRuns.Add(-1)
}

// waitNoReap waits in a blocking waitid for pid (by its pidfd, if not -1)
// to exit, and leaves it unreaped.
func waitNoReap(pid, pidfd int) {
	var info unix.Siginfo
	for {
		var err error
		if pidfd >= 0 {
			err = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOWAIT, nil)
		} else {
			err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		}
		if err != unix.EINTR {
			return
		}
	}
}

// spawn has the spawner thread start cmd.
func spawn(cmd *exec.Cmd, cpus []int, group *cgroup, key Key, guard string) error {
	req := spawnRequest{cmd: cmd, cpus: cpus, group: group, key: key, guard: guard, done: make(chan error, 1)}
	if len(cpus) > 0 {
		// A pinned start goes to the spawner its first CPU names, when that
		// one is idle: a lane's runs keep their CPUs, so that spawner's
		// thread is already pinned there and wakes on the CPU the lane's
		// last run just left. Another spawner would wake where its own last
		// run was, often behind a running run, and leave this CPU idle.
		select {
		case procs.near[cpus[0]%len(procs.near)] <- req:
			return <-req.done
		default:
		}
	}
	procs.spawn <- req
	return <-req.done
}

// watch waits for the run's process to exit without reaping it (WNOWAIT):
// while the zombie exists, its pid cannot be reused, so signalling its
// group stays safe. With a pidfd it waits in Go's poller, so a thousand
// running runs do not hold a thousand threads blocked in waitid.
func (p *Process) watch() {
	defer close(p.exited)
	if p.pidfd >= 0 && unix.SetNonblock(p.pidfd, true) == nil {
		f := os.NewFile(uintptr(p.pidfd), "pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			exited := false
			// Read waits in the poller for the pidfd to be readable, which
			// it is once the process exited; a poller failure falls back
			// to the blocking wait below.
			rc.Read(func(fd uintptr) bool {
				var info unix.Siginfo
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
				exited = err != nil && err != unix.EINTR || info.Signo != 0
				return exited
			})
			if exited {
				return
			}
		}
	} else if p.pidfd >= 0 {
		unix.Close(p.pidfd)
	}
	waitNoReap(p.pid, -1)
}

// Signal sends sig to the process's whole group, unless its reaping has
// begun: after that its number may be another's.
func (p *Process) Signal(sig syscall.Signal) {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if !p.reaped {
		unix.Kill(-p.pid, sig)
	}
}

// reap is called once the run's process has exited: it kills what is left
// of the run's group, has the sweeper collect escaped descendants, reaps
// the process, and says how the run ended.
func (p *Process) reap() Exit {
	p.sigMu.Lock()
	p.reaped = true
	p.sigMu.Unlock()
	unix.Kill(-p.pid, unix.SIGKILL) // before reaping: the zombie still holds the group id
	procs.supervisor.ended(p.pid)
	procs.mu.Lock()
	if procs.running[p.key]--; procs.running[p.key] <= 0 {
		delete(procs.running, p.key)
	}
	procs.ended[p.pid] = true
	procs.mu.Unlock()
	select {
	case procs.kick <- struct{}{}:
	default:
	}
	err := p.cmd.Wait()
	procs.mu.Lock()
	if procs.leaders[p.pid]--; procs.leaders[p.pid] <= 0 {
		delete(procs.leaders, p.pid)
	}
	procs.mu.Unlock()
	return exitOf(p.cmd.ProcessState, err)
}

// exitOf is how a reaped process ended.
func exitOf(ps *os.ProcessState, err error) Exit {
	exit := Exit{Code: exitCode(ps), Usage: kernelUsage(ps), Err: err}
	if ws, ok := processWaitStatus(ps); ok && ws.Signaled() {
		exit.Signal = unix.SignalName(ws.Signal())
	}
	return exit
}

// helper is what a helper process's keeper goroutine tells Wait.
type helper struct {
	p    *Process
	done chan struct{} // closed once the keeper has reaped it
	exit Exit
}

// LaunchHelper starts cmd as a helper process of the program's own, not a
// run (the MPS control daemon): in a process group of its own, killed
// when the program dies, even by SIGKILL with its supervisor (a keeper
// goroutine holds the thread that forked it until it has exited, and its
// parent-death signal is SIGKILL), and left alone by the sweeper. Its
// Wait may be called from any goroutine, and more than once.
func LaunchHelper(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{cmd: cmd, pidfd: -1, exited: make(chan struct{})}
	h := &helper{p: p, done: make(chan struct{})}
	p.helper = h
	started := make(chan error, 1)
	go func() {
		// The thread that forks the helper fires its parent-death signal
		// when it ends: it is held until the helper has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		waitNoReap(p.pid, -1)
		close(p.exited)
		p.sigMu.Lock()
		p.reaped = true
		p.sigMu.Unlock()
		h.exit = exitOf(cmd.ProcessState, cmd.Wait())
		close(h.done)
	}()
	if err := <-started; err != nil {
		return nil, &StartError{err}
	}
	return p, nil
}

// wait waits for the keeper to reap the helper.
func (h *helper) wait() Exit {
	<-h.done
	return h.exit
}

// kernelUsage reads the rusage of a reaped process: it covers the process
// and the descendants it waited for.
func kernelUsage(ps *os.ProcessState) run.Usage {
	if ps == nil {
		return run.Usage{}
	}
	u := run.Usage{CPU: ps.UserTime() + ps.SystemTime()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		u.MaxRSS = uint64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	return u
}

func processWaitStatus(ps *os.ProcessState) (syscall.WaitStatus, bool) {
	if ps == nil {
		return 0, false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ws, ok
}

// SweepAll kills and reaps every leftover of ended runs and returns when
// none is left (or after a few seconds, if one cannot die).
func SweepAll() {
	if procs.now == nil {
		return
	}
	done := make(chan struct{})
	procs.now <- done
	<-done
	killMarked() // what left its group and its environment too
}

// minSweepInterval limits how often runs that end trigger a scan of /proc,
// which costs about a millisecond per thousand processes.
const minSweepInterval = 100 * time.Millisecond

func sweeper() {
	var last time.Time
	var interval = minSweepInterval
	for {
		var waiter chan struct{}
		select {
		case <-procs.kick:
			if d := interval - time.Since(last); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case waiter = <-procs.now:
					t.Stop()
				}
			}
		case waiter = <-procs.now:
		}
		began := time.Now()
		sweep(waiter != nil)
		last = time.Now()
		interval = max(minSweepInterval, 10*last.Sub(began))
		if waiter != nil {
			close(waiter)
		}
	}
}

// sweep kills and reaps adopted leftovers until a scan finds none. With
// drain, it also waits (up to a limit) until the process groups of ended runs
// are empty.
func sweep(drain bool) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		targets := pickTargets()
		for _, pid := range targets {
			reap(pid)
		}
		procs.mu.Lock()
		for pgid := range procs.ended {
			if unix.Kill(-pgid, 0) == unix.ESRCH {
				delete(procs.ended, pgid)
			}
		}
		pending := len(procs.ended)
		procs.mu.Unlock()
		switch {
		case len(targets) > 0:
			continue // the killed ones' children have just been reparented to us
		case !drain || pending == 0 || time.Now().After(deadline):
			return
		}
		time.Sleep(2 * time.Millisecond) // a group member between parents
	}
}

// pickTargets finds the children of this process that are leftovers of
// ended runs, sends them SIGKILL and returns their pids. Only this process
// may reap them, so their pids stay valid until reap.
//
// It scans /proc without a lock, so that starts go on meanwhile, and
// decides on the children it found with starts held off, reading each
// one's parent and group again: a child started during the scan is
// registered by then, a run's process reaped since is no longer a child
// (its pid may be another process's now), and a leftover stays a child
// until this process reaps it.
func pickTargets() []int {
	self := os.Getpid()
	var buf [512]byte
	children, ok := listChildren()
	if !ok {
		// No /proc/PID/task/TID/children (a kernel without
		// CONFIG_PROC_CHILDREN): every process's stat says its parent.
		children = childrenByStat()
	}
	if len(children) == 0 {
		return nil
	}
	procs.starting.Lock()
	defer procs.starting.Unlock()
	procs.mu.Lock()
	defer procs.mu.Unlock()
	var targets []int
	for _, pid := range children {
		if procs.leaders[pid] > 0 {
			continue
		}
		ppid, pgid, ok := readStat(pid, buf[:])
		if !ok || ppid != self {
			continue
		}
		if procs.ended[pgid] || endedAttempt(pid) || endedRunMark(pid) {
			unix.Kill(pid, unix.SIGKILL)
			targets = append(targets, pid)
		}
	}
	return targets
}

// listChildren returns this process's children from the children files of
// its threads (a child is listed under the thread that forked it, an
// adopted orphan under one of them): a few small reads, where scanning
// /proc reads a file per process of the node, thousands on a login node.
// It reports false when the kernel has no such files.
func listChildren() ([]int, bool) {
	if noChildrenFiles.Load() {
		return nil, false
	}
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return nil, false
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	var children []int
	listed := false
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + tid + "/children")
		if err != nil {
			continue // the thread is gone, or the kernel has no such file
		}
		listed = true
		for f := range bytes.FieldsSeq(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				children = append(children, pid)
			}
		}
	}
	return children, listed
}

// noChildrenFiles makes listChildren report no children files, for a test
// of the sweep by /proc (Knobs.NoChildrenFiles).
var noChildrenFiles atomic.Bool

// applyKnobs puts knobs in force.
func applyKnobs() {
	if Setup() != nil {
		return
	}
	procs.supervisor = procs.guard
	if knobs.Unsupervised {
		procs.supervisor = nil
	}
	noChildrenFiles.Store(knobs.NoChildrenFiles)
}

// Supervised reports whether the program's supervisor runs (MaybeGuard was
// called, and Setup has run).
func Supervised() bool { return procs.supervisor != nil }

// readStat returns the parent and process group of pid from /proc/pid/stat.
func readStat(pid int, buf []byte) (ppid, pgid int, ok bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	// "pid (comm) state ppid pgrp ..."; comm may contain spaces and parens.
	i := bytes.LastIndexByte(buf[:n], ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(buf[i+1 : n])
	if len(f) < 3 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	return ppid, pgid, err1 == nil && err2 == nil
}

// endedAttempt reports whether pid's environment names a run attempt that
// is no longer running.
func endedAttempt(pid int) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	var key Key
	var haveID, haveAttempt bool
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("NODEPACK_RUN_ID=")); ok {
			key.Run, haveID = string(v), true
		} else if v, ok := bytes.CutPrefix(kv, []byte("NODEPACK_ATTEMPT=")); ok {
			key.Attempt, _ = strconv.Atoi(string(v))
			haveAttempt = true
		}
	}
	return haveID && haveAttempt && key != procs.self && procs.running[key] == 0
}

func reap(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
