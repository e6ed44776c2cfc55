//go:build linux

package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStopLadder: Stop climbs the ladder as far as the process makes it:
// SIGTERM for a process that ends by it; SIGKILL after the grace for one
// that ignores it, or at once once Kill is closed; the first signal
// (a checkpoint's) before SIGTERM, until Saved is closed. A second Stop
// waits for the exit and sends nothing more.
func TestStopLadder(t *testing.T) {
	closedKill := make(chan struct{})
	close(closedKill)
	for _, tc := range []struct {
		name   string
		script string
		ladder Ladder
		want   string // the signal it died by
		saved  bool   // it saved (the first signal came), and Saved was closed
	}{
		{name: "term", script: "touch up; exec sleep 300", ladder: Ladder{Grace: time.Hour}, want: "SIGTERM"},
		{name: "term ignored", script: "trap '' TERM; touch up; while :; do sleep 0.01; done", ladder: Ladder{Grace: 10 * time.Millisecond}, want: "SIGKILL"},
		{name: "killed", script: "touch up; exec sleep 300", ladder: Ladder{Grace: time.Hour, Kill: closedKill}, want: "SIGKILL"},
		{name: "checkpoint first", script: "trap 'touch saved' USR1; touch up; while :; do sleep 0.01; done", ladder: Ladder{First: syscall.SIGUSR1, Grace: time.Hour}, want: "SIGTERM", saved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			startPaths(t, func(t *testing.T) {
				dir := t.TempDir()
				p := launch(t, Spec{}, "bash", "-c", "cd "+dir+" && "+tc.script)
				poll(t, func() bool { _, err := os.Stat(filepath.Join(dir, "up")); return err == nil })
				l := tc.ladder
				if tc.saved {
					saved := make(chan struct{})
					l.Saved = saved
					go func() {
						for {
							if _, err := os.Stat(filepath.Join(dir, "saved")); err == nil {
								close(saved)
								return
							}
							time.Sleep(2 * time.Millisecond)
						}
					}()
				}
				stopped := make(chan struct{})
				go func() {
					p.Stop(l)
					p.Stop(l) // waits, sends nothing more
					close(stopped)
				}()
				exit := p.Wait()
				<-stopped
				if exit.Signal != tc.want {
					t.Errorf("died by %q (exit %d), want %s", exit.Signal, exit.Code, tc.want)
				}
				if _, err := os.Stat(filepath.Join(dir, "saved")); (err == nil) != tc.saved {
					t.Errorf("saved: %v, want %v", err == nil, tc.saved)
				}
			})
		})
	}
}

// TestSetStopsEveryLiveProcess: StopAll stops every process in the set,
// and one added afterwards at once; a removed one is left alone.
func TestSetStopsEveryLiveProcess(t *testing.T) {
	var s Set // the zero value is ready
	term := Ladder{Grace: time.Hour}
	a := launch(t, Spec{Key: Key{Run: "a", Attempt: 1}}, "sleep", "300")
	b := launch(t, Spec{Key: Key{Run: "b", Attempt: 1}}, "sleep", "300")
	c := launch(t, Spec{Key: Key{Run: "c", Attempt: 1}}, "sleep", "300")
	s.Add(a, func() { a.Stop(term) })
	s.Add(b, func() { b.Stop(term) })
	removeC := s.Add(c, func() { c.Stop(term) })
	removeC()
	if n := s.Len(); n != 2 {
		t.Errorf("Len %d, want 2", n)
	}
	s.StopAll()
	late := launch(t, Spec{Key: Key{Run: "late", Attempt: 1}}, "sleep", "300")
	s.Add(late, func() { late.Stop(term) })
	for name, p := range map[string]*Process{"a": a, "b": b, "late": late} {
		if exit := p.Wait(); exit.Signal != "SIGTERM" {
			t.Errorf("%s: died by %q, want SIGTERM", name, exit.Signal)
		}
	}
	if !alive(c.PID()) {
		t.Error("the removed process was stopped")
	}
	c.Signal(syscall.SIGKILL)
	if exit := c.Wait(); exit.Signal != "SIGKILL" {
		t.Errorf("c: died by %q, want SIGKILL", exit.Signal)
	}
}

// TestWaitSaysHowItEnded: the exit status, a death by signal as 128+N,
// the kernel's CPU time, and Spec.Exited called while the pid is still
// the process's (a zombie, not reaped).
func TestWaitSaysHowItEnded(t *testing.T) {
	startPaths(t, func(t *testing.T) {
		if exit := launch(t, Spec{}, "sh", "-c", "exit 3").Wait(); exit.Code != 3 || exit.Signal != "" || exit.Err == nil {
			t.Errorf("exit 3: %+v", exit)
		}
		if exit := launch(t, Spec{}, "sh", "-c", "kill -SEGV $$").Wait(); exit.Code != 128+int(syscall.SIGSEGV) || exit.Signal != "SIGSEGV" {
			t.Errorf("SIGSEGV: %+v", exit)
		}
		var p *Process
		var zombieAtExit bool
		p = launch(t, Spec{Exited: func() { zombieAtExit = zombie(p.PID()) && syscall.Kill(p.PID(), 0) == nil }}, "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
		exit := p.Wait()
		if exit.Code != 0 || exit.Usage.CPU <= 0 {
			t.Errorf("a busy loop: %+v, want exit 0 and some CPU time", exit)
		}
		if !zombieAtExit {
			t.Error("Spec.Exited was called when the process was not an unreaped zombie")
		}
	})
}

// TestLaunchHelper: a helper of the program's own starts in a group of its
// own, its Wait may be called from any goroutine and more than once, and
// the sweep for runs' leftovers leaves it alone.
func TestLaunchHelper(t *testing.T) {
	p, err := LaunchHelper(exec.Command("sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	if pgid, _ := syscall.Getpgid(p.PID()); pgid != p.PID() {
		t.Errorf("process group %d, want its own %d", pgid, p.PID())
	}
	SweepAll()
	if !alive(p.PID()) {
		t.Fatal("the sweep killed a helper")
	}
	p.Signal(syscall.SIGKILL)
	done := make(chan Exit)
	go func() { done <- p.Wait() }()
	if exit := <-done; exit.Signal != "SIGKILL" || p.Wait().Signal != "SIGKILL" {
		t.Errorf("helper: %+v, want killed by SIGKILL", exit)
	}
}
