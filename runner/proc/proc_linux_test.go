//go:build linux

package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/pack"
)

// startPaths runs test with processes started from the calling
// goroutine's thread with the supervisor (a program that called
// MaybeGuard, like nodepack) and without it (an embedder that did not),
// and from a spawner thread, as processes in a memory cgroup and those
// beyond directLimit do.
func startPaths(t *testing.T, test func(t *testing.T)) {
	if err := Setup(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"supervised", "unsupervised", "spawner"} {
		t.Run(path, func(t *testing.T) {
			var k Knobs
			switch {
			case path == "unsupervised":
				k.Unsupervised = true
			case !Supervised():
				t.Skip("the test binary did not call MaybeGuard")
			case path == "spawner":
				k.Spawner = true
			}
			defer SetKnobs(k)()
			test(t)
		})
	}
}

// alive reports whether pid exists and is no zombie.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !zombie(pid) }

// procStatus reads one field of /proc/PID/status.
func procStatus(pid int, field string) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ignores reports whether pid ignores sig.
func ignores(pid int, sig syscall.Signal) bool {
	mask, err := strconv.ParseUint(procStatus(pid, "SigIgn"), 16, 64)
	return err == nil && mask&(1<<(sig-1)) != 0
}

// poll waits until cond holds, for at most 10 seconds.
func poll(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// launch launches argv with key run/1, failing the test if it cannot.
func launch(t *testing.T, s Spec, argv ...string) *Process {
	t.Helper()
	s.Cmd = exec.Command(argv[0], argv[1:]...)
	if s.Key.Run == "" {
		s.Key = Key{Run: t.Name(), Attempt: 1}
	}
	p, err := Launch(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLaunchPinsAndLeavesThreadsAsTheyWere: a process is pinned to its
// CPUs from its first instruction, however it started, and the program's
// own threads keep the process's mask: a thread that started a process
// directly has it back, and only the spawners stay pinned.
func TestLaunchPinsAndLeavesThreadsAsTheyWere(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		var mask unix.CPUSet
		unix.SchedGetaffinity(0, &mask)
		var cpus []int
		for c := range len(mask) * 64 {
			if mask.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
		for i := range 100 {
			cpu := cpus[i%len(cpus)]
			var out strings.Builder
			cmd := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status")
			cmd.Stdout = &out
			p, err := Launch(Spec{Cmd: cmd, CPUs: []int{cpu}, Key: Key{Run: strconv.Itoa(i), Attempt: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if exit := p.Wait(); exit.Code != 0 {
				t.Fatalf("grep: %+v", exit)
			}
			if got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:")); got != strconv.Itoa(cpu) {
				t.Errorf("process %d pinned to %d: Cpus_allowed_list %q", i, cpu, got)
			}
		}
		want := pack.FormatCPUList(cpus)
		tasks, _ := filepath.Glob("/proc/self/task/*")
		for _, task := range tasks {
			tid, _ := strconv.Atoi(filepath.Base(task))
			if slices.Contains(procs.spawnerTIDs, tid) {
				continue
			}
			// /proc/TID answers for a thread too.
			if got := procStatus(tid, "Cpus_allowed_list"); got != "" && got != want {
				t.Errorf("thread %d of the program: Cpus_allowed_list %s, want the process's %s", tid, got, want)
			}
		}
		if n := directRuns.Load(); n != 0 {
			t.Errorf("%d direct starts still counted after every Wait", n)
		}
	})
}

// TestRunOutlivesThreadsThatEnd: a run's Pdeathsig fires when the thread
// that forked it ends, and a goroutine that exits locked to its thread
// ends that thread. No such goroutine of the host program can end the
// thread a running run was forked from, even while the run's goroutine is
// parked between its start and its wait: that goroutine, or a spawner,
// holds the thread.
func TestRunOutlivesThreadsThatEnd(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		p := launch(t, Spec{}, "sleep", "30")
		// This goroutine parks while threads end: each goroutine takes an
		// idle thread, or a new one, and ends it.
		for range 50 {
			done := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(done)
			}()
			<-done
		}
		// An observation window, not a synchronisation: a run killed by a
		// thread's end is dead well within it, and a slow machine can only
		// make the test miss a death, never fail a run that lives.
		time.Sleep(100 * time.Millisecond)
		ok := alive(p.pid)
		p.Signal(syscall.SIGKILL)
		p.Wait()
		if !ok {
			t.Error("the run died when threads of the runner ended")
		}
	})
}

// TestNoSignalAfterReap: once a run's process is reaped its number may
// belong to another process, so a stop that comes late (a timeout firing
// as the run ends, the sampler's kill) must send nothing.
func TestNoSignalAfterReap(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		p := launch(t, Spec{}, "true")
		p.Wait()
		// Another process group now has the number, as after pid reuse.
		other := exec.Command("sleep", "30")
		other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		p.pid = other.Process.Pid
		p.Signal(syscall.SIGKILL)
		// kill(2) has marked its signal pending by the time it returns,
		// and a pending SIGKILL is taken before SIGTERM: the SIGTERM sent
		// now is what ends the process only if no SIGKILL came.
		other.Process.Signal(syscall.SIGTERM)
		other.Wait()
		if ws := other.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGTERM {
			t.Errorf("the process that has a reaped run's number now ended by %v; want SIGTERM, the only signal meant for it", ws.Signal())
		}
	})
}
