package proc

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/runner/run"
)

// Key names one attempt of one run: every process of its tree carries it
// in its environment (NODEPACK_RUN_ID, NODEPACK_ATTEMPT), and the sweeper
// tells an ended attempt's leftovers by it.
type Key struct {
	Run     string
	Attempt int
}

// Spec is what Launch starts: a command, the CPUs it is pinned to from its
// first instruction (none: the process's own mask) and, with Cgroups and
// MemLimit, the memory cgroup of its own it starts in.
type Spec struct {
	Cmd      *exec.Cmd // not started; its SysProcAttr is Launch's
	CPUs     []int
	Key      Key
	Cgroups  *Cgroups // where its memory cgroup is made; nil for none
	MemLimit uint64   // > 0 with Cgroups: its memory and swap limit
	// Exited, if not nil, is called by Wait once the process has exited
	// and before it is reaped, while its pid still names it: stop what
	// watches the process by its pid there.
	Exited func()
	// Guard names the deadline (StopBy) under which the supervisor stops
	// the process's group if the program cannot; "" for none. A name of
	// letters, digits and '.', '-', '_', ':'.
	Guard string
}

// Exit is how a process ended.
type Exit struct {
	Code     int       // its exit status as shells give it: 128+N for a death by signal N; -1 if unknown
	Signal   string    // the signal that killed it ("SIGKILL"); "" when it exited
	Usage    run.Usage // the kernel's rusage: the process and the descendants it waited for
	OOMKills uint64    // the kernel's OOM kills in its memory cgroup (Spec.MemLimit)
	Err      error     // what waiting for it said, beyond a non-zero exit
}

// StartError is a command that could not start (a missing program, say):
// the run's failure, not the runner's. It wraps what exec said, so
// errors.Is(err, fs.ErrNotExist) holds for a missing program.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Ladder is how Stop escalates. With First (a checkpoint signal; 0 for
// none) Stop sends it and waits until Saved is closed (nil: never) or
// Grace passes; then it sends SIGTERM and waits for Grace; then SIGKILL.
// Once Kill is closed (nil: never), Stop goes to SIGKILL at once.
type Ladder struct {
	First syscall.Signal
	Saved <-chan struct{}
	Grace time.Duration
	Kill  <-chan struct{}
}

// killed reports whether l.Kill is closed.
func (l Ladder) killed() bool {
	select {
	case <-l.Kill:
		return true
	default:
		return false
	}
}

// PID returns the process's id, which is also its process group's.
func (p *Process) PID() int { return p.pid }

// Exited is closed once the process has exited (it may not be reaped yet).
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop stops the process and its group by the ladder l and returns once
// the process has exited. Only the first call climbs the ladder; later
// ones wait for the exit. A process that has exited is sent nothing.
func (p *Process) Stop(l Ladder) {
	p.stopOnce.Do(func() { p.climb(l) })
	<-p.exited
}

// climb sends the ladder's signals, each after the last one's wait.
func (p *Process) climb(l Ladder) {
	if l.First != 0 && !l.killed() {
		p.Signal(l.First)
		if !p.waitFor(l.Grace, l.Saved, l.Kill) {
			return
		}
	}
	if !l.killed() {
		p.Signal(syscall.SIGTERM)
		if !p.waitFor(l.Grace, nil, l.Kill) {
			return
		}
	}
	p.Signal(syscall.SIGKILL)
}

// waitFor waits up to d, until saved or kill is closed, or the process
// exits; it reports false when the process exited.
func (p *Process) waitFor(d time.Duration, saved, kill <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return false
	case <-saved:
	case <-kill:
	case <-t.C:
	}
	return true
}

// Set is the live processes, to stop them all at once (a sweep that is
// stopped): each is added with how to stop it. Its zero value is ready to
// use; its methods may be called concurrently.
type Set struct {
	mu       sync.Mutex
	live     map[*Process]func()
	stopping bool
}

// Add adds p, with stop, which stops it; remove takes it out again, once
// it has exited. When the set is being stopped (StopAll), stop is called
// at once, on a goroutine of its own.
func (s *Set) Add(p *Process, stop func()) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		go stop()
	}
	if s.live == nil {
		s.live = make(map[*Process]func())
	}
	s.live[p] = stop
	return func() {
		s.mu.Lock()
		delete(s.live, p)
		s.mu.Unlock()
	}
}

// StopAll calls every live process's stop, each on a goroutine of its
// own, and the stop of every process added from now on; it returns at
// once.
func (s *Set) StopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for _, stop := range s.live {
		go stop()
	}
}

// Len returns how many processes are in the set.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// exitCode reports a process's exit status the way shells do: 128+N for a
// death by signal N; -1 if unknown.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return WaitStatusCode(ws)
	}
	return ps.ExitCode()
}

// WaitStatusCode is a raw wait status as an exit status the way shells
// give it: 128+N for a death by signal N.
func WaitStatusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return run.ExitSignalBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}
