//go:build linux

package execute

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A guard is a copy of the host program, started by the runner in place of
// a run: it starts the run and stays its parent until the run's whole tree
// is gone. It exists for the case the runner cannot handle itself, a
// SIGKILL of the runner's process: Pdeathsig ends only a direct child, so
// without a guard a run's grandchildren would be reparented to init and
// live on.
//
// Protocol. The runner starts the guard as /proc/self/exe from its spawner
// thread, so the guard, and through it the run, inherit the run's CPU mask;
// the guard is in a process group of its own, outside the run's, so that
// neither the runner's signals to the run nor a terminal's reach it. It gets
// the run's environment plus guardEnv=1, and two extra descriptors:
//
//	fd 3  the read end of a pipe whose only write end the runner holds:
//	      end of file means the runner is gone;
//	fd 4  a report pipe to the runner: "started PID", or "failed ERRNO PATH"
//	      when the run could not start (or "failed guard: MESSAGE"),
//	      then, at the end, "exit WAITSTATUS MAXRSS_KB UTIME_US STIME_US".
//
// The guard is a child subreaper and starts the run with its own process
// group and Pdeathsig. When the run's process exits, the guard kills what
// is left of its group, then kills and reaps every process it adopted
// (descendants that escaped with setsid), reports, and exits 0. When fd 3
// reaches end of file it does the same at once, without waiting for the
// run. Signals such as SIGTERM from scancel, which Slurm sends to every
// process of the job, are caught and ignored: the run gets its own copy.
const guardEnv = "NODEPACK_GUARD"

// guardEnabled says that the host program called MaybeGuard, so
// /proc/self/exe can be started as a guard.
var guardEnabled atomic.Bool

// MaybeGuard lets the runner start every run through a guard process, so
// that a run's whole process tree dies with the program even when the
// program is killed with SIGKILL. Call it first thing in main: when the
// process was started as a guard it does the guard's work and exits, and
// otherwise it returns at once.
//
// A guard is a second exec of the program's own binary per attempt
// (a millisecond or two of CPU and a few MB of memory while the run lives).
// Without the call, runs are started directly: the run's process still
// dies with the program (Pdeathsig), but its descendants may survive a
// SIGKILL of the program.
func MaybeGuard() {
	if os.Getenv(guardEnv) != "1" {
		guardEnabled.Store(true)
		return
	}
	// syscall.Exit, not os.Exit: nothing of the host program's is to run,
	// and a race-enabled build would sleep a second in os.Exit.
	syscall.Exit(guard(os.Args))
}

// guardArg0 names guards in ps.
const guardArg0 = "nodepack-guard"

// guardArgs turns argv (path then the run's argv) into the guard's
// arguments.
func guardArgs(path string, args []string) []string {
	return append([]string{guardArg0, path}, args...)
}

func guard(args []string) int {
	runtime.LockOSThread() // the run's Pdeathsig is tied to this thread; never unlocked
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
		syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	runnerGone := os.NewFile(3, "runner")
	report := os.NewFile(4, "report")
	if len(args) < 3 {
		fmt.Fprintf(report, "failed guard: want a path and an argv, got %q\n", args)
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(report, "failed guard: child subreaper: %v\n", err)
		return 2
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, guardEnv+"=") {
			env = append(env, kv)
		}
	}
	path := args[1]
	pid, err := syscall.ForkExec(path, args[2:], &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		// The errno crosses the pipe as a number, so that the runner can
		// give back the same *os.PathError a direct start gives.
		errno, _ := err.(syscall.Errno)
		fmt.Fprintf(report, "failed %d %s\n", int(errno), oneLine(path))
		return 127
	}
	fmt.Fprintf(report, "started %d\n", pid)

	go func() {
		var b [1]byte
		runnerGone.Read(b[:]) // returns at end of file: the runner has died
		unix.Kill(-pid, unix.SIGKILL)
		var total unix.Rusage
		reapAdopted(&total)
		syscall.Exit(0)
	}()

	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	unix.Kill(-pid, unix.SIGKILL) // before reaping: the zombie keeps the group id taken
	var ws unix.WaitStatus
	var total unix.Rusage
	for {
		_, err := unix.Wait4(pid, &ws, 0, &total)
		if err != unix.EINTR {
			break
		}
	}
	reapAdopted(&total)
	fmt.Fprintf(report, "exit %d %d %d %d\n", int(ws), total.Maxrss,
		total.Utime.Sec*1e6+int64(total.Utime.Usec), total.Stime.Sec*1e6+int64(total.Stime.Usec))
	return 0
}

// reapAdopted kills and reaps every child of the guard, and the children
// those leave behind, until it has none; it adds their usage to total.
func reapAdopted(total *unix.Rusage) {
	self := os.Getpid()
	var buf [512]byte
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, &ru)
		switch {
		case errors.Is(err, unix.ECHILD):
			return
		case err == nil && pid > 0:
			addRusage(total, &ru)
			continue
		}
		// Some children are alive: kill them all, then wait for one.
		d, err := os.Open("/proc")
		if err != nil {
			return
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, name := range names {
			pid, err := strconv.Atoi(name)
			if err != nil {
				continue
			}
			if ppid, _, ok := readStat(pid, buf[:]); ok && ppid == self {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		if pid, err := unix.Wait4(-1, &ws, 0, &ru); err == nil && pid > 0 {
			addRusage(total, &ru)
		}
	}
}

func addRusage(total, ru *unix.Rusage) {
	total.Maxrss = max(total.Maxrss, ru.Maxrss)
	total.Utime.Sec += ru.Utime.Sec
	total.Utime.Usec += ru.Utime.Usec
	total.Stime.Sec += ru.Stime.Sec
	total.Stime.Usec += ru.Stime.Usec
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// guardReport is what a guard said about its run.
type guardReport struct {
	status syscall.WaitStatus
	maxRSS uint64 // bytes
	cpu    int64  // microseconds
}

// readGuardStart reads the guard's first line: the run's pid, or why it
// could not start: a *startError wrapping the *os.PathError that exec
// gave, as for a direct start.
func readGuardStart(r *bufio.Reader) (pid int, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, errors.New("guard exited before starting the run")
	}
	word, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	switch word {
	case "started":
		if pid, err := strconv.Atoi(rest); err == nil && pid > 0 {
			return pid, nil
		}
	case "failed":
		if num, path, ok := strings.Cut(rest, " "); ok {
			if errno, err := strconv.Atoi(num); err == nil {
				return 0, &startError{&os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(errno)}}
			}
		}
		return 0, fmt.Errorf("guard: %s", rest)
	}
	return 0, fmt.Errorf("guard: unexpected report %q", line)
}

// readGuardExit reads the guard's last line; ok is false if it has none
// (the guard was killed).
func readGuardExit(r *bufio.Reader) (rep guardReport, ok bool) {
	line, err := r.ReadString('\n')
	if err != nil {
		return rep, false
	}
	var status int
	var maxRSSKB, utime, stime int64
	if _, err := fmt.Sscanf(line, "exit %d %d %d %d\n", &status, &maxRSSKB, &utime, &stime); err != nil {
		return rep, false
	}
	return guardReport{status: syscall.WaitStatus(status), maxRSS: uint64(maxRSSKB) * 1024, cpu: utime + stime}, true
}
