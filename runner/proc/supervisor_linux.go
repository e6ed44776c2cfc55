//go:build linux

package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is a copy of the host program, started once per process
// (not per run) in a process group of its own, that outlives the process
// to clean up after it. It exists for the one case the process cannot
// handle itself, its own SIGKILL: Pdeathsig ends a run's leader, but not
// the leader's descendants, which init would adopt and which would run on.
//
// Protocol. The supervisor's fd 3 is the read end of a pipe whose only
// write end this process holds; end of file means this process is gone.
// Over it the process says, one line each, "g PGID" when a run started in
// process group PGID and "- PGID" once that run ended and its group was
// sent SIGKILL ("g PGID GUARD" for a run under a guard's deadline); "t
// PATH" and "T PATH" for a scratch root; "f GUARD AT SIG GRACE" for the
// deadline by which the runs of GUARD are to be stopped (StopBy). Its environment names this process's session (SessionVar).
//
// At end of file the supervisor sends SIGKILL to every group it still
// knows, then to every process whose environment carries the session
// (every run gets it, and its descendants inherit it, also after setsid or
// a double fork), scanning /proc until a scan finds none alive, and exits.
// It ignores the signals a batch system sends to every process of a job
// (SIGTERM from scancel, say): this process decides what those mean to the
// runs, and the supervisor must outlive it.
const supervisorEnv = "NODEPACK_SUPERVISOR"

// supervisorNap is how long the supervisor sleeps between reads of its
// pipe, which holds a few thousand messages (runs started) meanwhile.
const supervisorNap = 20 * time.Millisecond

// supervisorArg0 names the supervisor in ps.
const supervisorArg0 = "nodepack-supervisor"

// supervisorEnabled says that the host program called MaybeGuard, so
// /proc/self/exe can be started as the supervisor.
var supervisorEnabled atomic.Bool

// MaybeGuard lets the runner start one supervisor process for the life of
// the program, so that every run's whole process tree dies with the
// program even when the program is killed with SIGKILL. Call it first
// thing in main: when the process was started as the supervisor it does
// the supervisor's work and exits, and otherwise it returns at once.
//
// The supervisor is one exec of the program's own binary, at the first
// Execute, not one per run: runs still start directly from the program.
// Without the call a run's leader still dies with the program (Pdeathsig),
// and a normal end, a cancellation or Kill still leave nothing behind, but
// the run's descendants may survive a SIGKILL of the program.
func MaybeGuard() {
	token := os.Getenv(supervisorEnv)
	if token == "" {
		supervisorEnabled.Store(true)
		return
	}
	// syscall.Exit, not os.Exit: nothing of the host program's is to run,
	// and a race-enabled build would sleep a second in os.Exit.
	syscall.Exit(supervise(os.NewFile(3, "runner"), token))
}

// newSessionToken makes this process's session token: unique on the node
// for as long as the process or its supervisor lives.
func newSessionToken() string {
	return strconv.Itoa(os.Getpid()) + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// Session is this process's session token, once Setup has run: a run's
// environment names it in SessionVar.
func Session() string { return procs.token }

// supervisor is this process's side of the supervisor: the pipe's write
// end. A nil *supervisor (none started) drops every message.
type supervisor struct {
	pid int
	mu  sync.Mutex
	w   *os.File // nil after a write failed
	buf []byte
}

// pidOf returns the supervisor's pid; 0 for none.
func (s *supervisor) pidOf() int {
	if s == nil {
		return 0
	}
	return s.pid
}

// startSupervisor starts the supervisor for the session token.
func startSupervisor(token string) (*supervisor, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{supervisorArg0}
	// Not the outer sessions: an outer supervisor must not kill this one,
	// which cleans up after this process.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, SessionVar+"=") && !strings.HasPrefix(kv, supervisorEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, supervisorEnv+"="+token)
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	// Never waited for: it outlives this process, or exits at its end.
	return &supervisor{pid: cmd.Process.Pid, w: w}, nil
}

// started and ended tell the supervisor about a run's process group;
// scratch and scratchDone about a scratch root (the runs' TMPDIRs'
// parent), which it removes if this process dies with it still there.
func (s *supervisor) started(pgid int, guard string) {
	if guard == "" {
		s.send('g', strconv.Itoa(pgid))
		return
	}
	s.send('g', strconv.Itoa(pgid)+" "+guard)
}
func (s *supervisor) ended(pgid int)          { s.send('-', strconv.Itoa(pgid)) }
func (s *supervisor) scratch(path string)     { s.send('t', strconv.Quote(path)) }
func (s *supervisor) scratchDone(path string) { s.send('T', strconv.Quote(path)) }

// deadline tells the supervisor when to stop every run it knows (see
// the deadline type); a zero time clears it.
func (s *supervisor) deadline(guard string, at time.Time, sig syscall.Signal, grace time.Duration) {
	if at.IsZero() {
		s.send('f', guard+" 0")
		return
	}
	abs := max(monotonic()+int64(time.Until(at)), 1)
	s.send('f', fmt.Sprintf("%s %d %d %d", guard, abs, int(sig), max(grace, 0).Nanoseconds()))
}

// StopBy tells the supervisor to stop every run of guard (Spec.Guard)
// still running at at, as
// a stop does (sig first if not 0, for a checkpoint, then SIGTERM a grace
// later, SIGKILL a grace after that), and at once any run that starts
// after at, unless a later call moves it; a zero at clears it. It is for
// a program that may freeze or hang (a stopped process, a hung mount)
// while its runs go on: the supervisor is another process. The program,
// while it runs, should stop its runs itself before at. It reports false
// when there is no supervisor (see MaybeGuard, Supervised).
func StopBy(guard string, at time.Time, sig syscall.Signal, grace time.Duration) bool {
	if !guardName(guard) || Setup() != nil || procs.supervisor == nil {
		return false
	}
	procs.supervisor.deadline(guard, at, sig, grace)
	return true
}

// guardName reports whether name may name a guard.
func guardName(name string) bool {
	if name == "" || len(name) > 200 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:", r)) {
			return false
		}
	}
	return true
}

// send writes one message. A supervisor that is gone (the write failed) is
// dropped: its protection is lost, the runs are not.
func (s *supervisor) send(op byte, arg string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return
	}
	s.buf = append(append(append(s.buf[:0], op, ' '), arg...), '\n')
	if _, err := s.w.Write(s.buf); err != nil {
		s.w.Close()
		s.w = nil
	}
}

// supervise is the supervisor's work: it follows what the runner says
// until end of file, then kills what is left of its session.
func supervise(runner io.Reader, token string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	follow(runner, token)
	return 0
}

// follow is supervise without its signal handling.
func follow(runner io.Reader, token string) {
	groups := map[int]bool{}
	scratch := map[string]bool{}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		r := bufio.NewReaderSize(runner, 64<<10)
		for {
			if r.Buffered() == 0 {
				// Read in batches: the runner's writes then wake no one,
				// and its end is seen at most a nap late.
				time.Sleep(supervisorNap)
			}
			line, err := r.ReadString('\n')
			if err != nil {
				return // end of file: the runner is gone
			}
			lines <- line
		}
	}()
	guards := map[int]string{}          // the groups under a guard's deadline
	deadlines := map[string]*deadline{} // by guard
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				timer.Stop()
				for pgid := range groups {
					unix.Kill(-pgid, unix.SIGKILL)
				}
				killSession(token, 5*time.Second)
				// The runs are gone: what they left in their TMPDIRs goes too.
				for path := range scratch {
					os.RemoveAll(path)
				}
				return
			}
			op, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			switch op {
			case "g", "-":
				num, guard, _ := strings.Cut(arg, " ")
				if pgid, err := strconv.Atoi(num); err == nil && pgid > 0 {
					if op == "-" {
						delete(groups, pgid)
						delete(guards, pgid)
						break
					}
					groups[pgid] = true
					if guard != "" {
						guards[pgid] = guard
						if d := deadlines[guard]; d != nil && d.passed() {
							// Started after its deadline (the runner
							// froze between its last check and the
							// start): it goes at once.
							unix.Kill(-pgid, unix.SIGKILL)
						}
					}
				}
			case "t", "T":
				if path, err := strconv.Unquote(arg); err == nil && path != "" {
					if op == "t" {
						scratch[path] = true
					} else {
						delete(scratch, path)
					}
				}
			case "f":
				guard, rest, _ := strings.Cut(arg, " ")
				if d, ok := parseDeadline(rest); ok && guard != "" {
					if d.at == 0 {
						delete(deadlines, guard)
					} else {
						deadlines[guard] = &d
					}
				}
			}
		case <-timer.C:
			for guard, d := range deadlines {
				d.fire(guard, guards)
			}
		}
		// The deadlines' next step, if any.
		timer.Stop()
		next := int64(0)
		for _, d := range deadlines {
			if at, ok := d.next(); ok && (next == 0 || at < next) {
				next = at
			}
		}
		if next > 0 {
			timer.Reset(time.Duration(next - monotonic()))
		}
	}
}

// A deadline is the runner's "f GUARD AT SIG GRACE": unless a newer one
// comes first, at AT (CLOCK_MONOTONIC nanoseconds, a clock the two
// processes share on the node and that a stopped process does not hold
// back) every group it knows under GUARD gets SIG (a checkpoint signal; 0 for none), then SIGTERM
// a GRACE later (at once without SIG), then SIGKILL a GRACE after that.
// "f GUARD 0" clears it. A group of GUARD announced after AT is killed at
// once. The runner, while it runs, stops its runs itself before
// AT: this is for a runner that is frozen or hung.
type deadline struct {
	at    int64
	steps []deadlineStep
	done  int // the steps taken
}

type deadlineStep struct {
	at  int64
	sig unix.Signal
}

func parseDeadline(arg string) (deadline, bool) {
	f := strings.Fields(arg)
	if len(f) != 1 && len(f) != 3 {
		return deadline{}, false
	}
	var n [3]int64
	for i := range f {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return deadline{}, false
		}
		n[i] = v
	}
	at, sig, grace := n[0], unix.Signal(n[1]), n[2]
	if at == 0 {
		return deadline{}, true
	}
	d := deadline{at: at}
	if sig != 0 && sig != unix.SIGTERM && sig != unix.SIGKILL {
		d.steps = append(d.steps, deadlineStep{at, sig})
		at += grace
	}
	d.steps = append(d.steps, deadlineStep{at, unix.SIGTERM}, deadlineStep{at + grace, unix.SIGKILL})
	return d, true
}

// passed reports whether the deadline came: a group started now is past it.
func (d *deadline) passed() bool { return d.at > 0 && monotonic() >= d.at }

// next is when the deadline's next step is due.
func (d *deadline) next() (int64, bool) {
	if d.done >= len(d.steps) {
		return 0, false
	}
	return d.steps[d.done].at, true
}

// fire takes the steps that are due, for the groups of guard.
func (d *deadline) fire(guard string, guards map[int]string) {
	for d.done < len(d.steps) && monotonic() >= d.steps[d.done].at {
		sig := d.steps[d.done].sig
		d.done++
		for pgid, g := range guards {
			if g == guard {
				unix.Kill(-pgid, sig)
			}
		}
	}
}

// monotonic is CLOCK_MONOTONIC in nanoseconds.
func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// killSession sends SIGKILL to every process whose environment carries
// the session token, or that carries the session's mark (see
// sessionMark: a run's process that left its group and cleared its
// environment), scanning /proc until a scan finds none alive or limit has
// passed.
func killSession(token string, limit time.Duration) {
	self, mark := os.Getpid(), sessionMark(token)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		d, err := os.Open("/proc")
		if err != nil {
			return
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		found := 0
		for _, name := range names {
			pid, err := strconv.Atoi(name)
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile("/proc/" + name + "/environ")
			if err != nil || !inSession(env, token) && !marked(pid, mark) {
				continue
			}
			if !zombie(pid) { // one killed already, waiting for its parent
				unix.Kill(pid, unix.SIGKILL)
				found++
			}
		}
		if found == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond) // let the killed ones die before the next look
	}
}

// zombie reports whether process pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// inSession reports whether an environment (/proc/PID/environ) carries the
// session token.
func inSession(environ []byte, token string) bool {
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(SessionVar+"=")); ok {
			for t := range strings.SplitSeq(string(v), ":") {
				if t == token {
					return true
				}
			}
		}
	}
	return false
}
