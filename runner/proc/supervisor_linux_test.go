//go:build linux

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
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
	s.started(scrubbed.Process.Pid)
	s.started(ended.Process.Pid)
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
