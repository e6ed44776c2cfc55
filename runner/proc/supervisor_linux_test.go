//go:build linux

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestFollowKillsWhatIsLeft: when the runner's pipe ends, the supervisor
// kills the process groups it was told of and every process that carries
// the session, and leaves alone a group it was told has ended and a
// process of another session.
func TestFollowKillsWhatIsLeft(t *testing.T) {
	token := "test." + strconv.Itoa(os.Getpid())
	start := func(env []string, setpgid bool) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: setpgid}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	scrubbed := start(nil, true)                                      // in a group it was told of, no session
	carrier := start([]string{SessionVar + "=outer:" + token}, false) // left its group, keeps the session
	ended := start(nil, true)                                         // a group that ended
	other := start([]string{SessionVar + "=" + token + "x"}, false)   // another session

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &supervisor{w: w}
	s.started(scrubbed.Process.Pid, "")
	s.started(ended.Process.Pid, "")
	s.ended(ended.Process.Pid)
	w.Close()
	follow(r, token) // returns once it killed what it had to
	r.Close()

	for _, c := range []*exec.Cmd{ended, other} {
		c.Process.Signal(syscall.SIGTERM) // a SIGKILL before would show instead
	}
	for _, tc := range []struct {
		desc string
		cmd  *exec.Cmd
		want syscall.Signal
	}{
		{"a member of a running group, without the session", scrubbed, syscall.SIGKILL},
		{"a process with the session, outside the group", carrier, syscall.SIGKILL},
		{"a member of a group that ended", ended, syscall.SIGTERM},
		{"a process of another session", other, syscall.SIGTERM},
	} {
		tc.cmd.Wait()
		if ws := tc.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tc.want {
			t.Errorf("%s: %v, want killed by %v", tc.desc, tc.cmd.ProcessState, tc.want)
		}
	}
}

// TestSupervisorIgnoresJobSignals: the supervisor outlives the signals a
// batch system sends to every process of a job, and ends with its pipe.
func TestSupervisorIgnoresJobSignals(t *testing.T) {
	if err := Setup(); err != nil {
		t.Fatal(err)
	}
	if procs.supervisor == nil {
		t.Skip("the test binary did not call MaybeGuard")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), supervisorEnv+"=test-ignores")
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	// Wait until it reads the pipe, so the signals meet its handlers.
	fmt.Fprintf(w, "g %d\n", 1<<30)
	poll(t, func() bool { return ignores(cmd.Process.Pid, syscall.SIGTERM) })
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2} {
		cmd.Process.Signal(sig)
	}
	w.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("supervisor: %v, want exit 0 at the end of its pipe", err)
	}
}

// TestFollowDeadline: at the runner's deadline the supervisor stops the
// groups it knows as a stop does, while the runner's pipe stays open (a
// frozen runner): the checkpoint signal, then SIGTERM, then SIGKILL, each
// a grace after the one before; a group announced after the deadline is
// killed at once; without a checkpoint signal SIGTERM comes first.
func TestFollowDeadline(t *testing.T) {
	dir := t.TempDir()
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	// It notes each signal it gets and ignores them: only SIGKILL ends it.
	stubborn := start(`trap 'echo usr1 >>` + dir + `/got' USR1; trap 'echo term >>` + dir + `/got' TERM; echo >` + dir + `/ready; while :; do sleep 0.01; done`)
	plain := start(`exec sleep 60`)
	other := start(`exec sleep 60`)
	poll(t, func() bool { _, err := os.Stat(dir + "/ready"); return err == nil })

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan struct{})
	go func() { follow(r, "test-deadline."+strconv.Itoa(os.Getpid())); close(done) }()
	s := &supervisor{w: w}
	s.started(stubborn.Process.Pid, "pool:a")
	s.deadline("pool:a", time.Now().Add(50*time.Millisecond), syscall.SIGUSR1, 200*time.Millisecond)
	stubborn.Wait()
	if ws := stubborn.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("after the deadline: %v, want killed by SIGKILL", stubborn.ProcessState)
	}
	if got, _ := os.ReadFile(dir + "/got"); string(got) != "usr1\nterm\n" {
		t.Errorf("signals before the SIGKILL: %q, want the checkpoint's, then SIGTERM", got)
	}
	// Past the deadline: a group that starts now goes at once.
	s.started(other.Process.Pid, "") // under no guard: left alone
	s.started(plain.Process.Pid, "pool:a")
	plain.Wait()
	if ws := plain.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("started after the deadline: %v, want killed by SIGKILL", plain.ProcessState)
	}
	// A new deadline without a checkpoint signal: SIGTERM first.
	third := start(`exec sleep 60`)
	s.deadline("pool:a", time.Now().Add(time.Second), 0, time.Hour) // told before the start: not past
	s.started(third.Process.Pid, "pool:a")
	third.Wait()
	if ws := third.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("a deadline without a checkpoint signal: %v, want killed by SIGTERM", third.ProcessState)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a group under no guard: %v, want it left running", err)
	}
	w.Close()
	<-done
}

// TestParseDeadline: the deadline message, and garbage refused.
func TestParseDeadline(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		ok   bool
		sigs string // {at signal-number}
	}{
		{"100 10 5", true, "[{100 10} {105 15} {110 9}]"},
		{"100 0 5", true, "[{100 15} {105 9}]"},
		{"100 15 5", true, "[{100 15} {105 9}]"},
		{"100", true, "[{100 15} {100 9}]"},
		{"0", true, "[]"},
		{"", false, ""},
		{"1 2", false, ""},
		{"-1 0 0", false, ""},
		{"x 0 0", false, ""},
	} {
		d, ok := parseDeadline(tc.arg)
		if ok != tc.ok || ok && fmt.Sprint(d.steps) != tc.sigs {
			t.Errorf("parseDeadline(%q) = %v %v, want %v %s", tc.arg, d.steps, ok, tc.ok, tc.sigs)
		}
	}
}
