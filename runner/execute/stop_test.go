package execute

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
)

// TestStopAfterExit: a stop that comes once the attempt's process has
// exited by itself (its timeout firing, or a pruning judgement taken, as
// it exits) stops nothing and gives no reason: the attempt ends as its
// exit says. Before the exit, the first stop's reason is the one kept.
func TestStopAfterExit(t *testing.T) {
	sleep, err := proc.Launch(proc.Spec{Cmd: exec.Command("sleep", "30"), Key: proc.Key{Run: "running", Attempt: 1}})
	if err != nil {
		t.Fatal(err)
	}
	running := &runStop{p: sleep}
	if !running.begin(run.Pruned) || running.begin(run.TimedOut) || running.reason != run.Pruned {
		t.Errorf("a running attempt: reason %q, want the first stop's, pruned", running.reason)
	}
	sleep.Signal(syscall.SIGKILL)
	sleep.Wait()
	exited := &runStop{p: sleep}
	for _, reason := range []run.Reason{run.Pruned, run.TimedOut, run.Interrupted} {
		if exited.begin(reason) {
			t.Errorf("an attempt whose process exited was stopped for %s", reason)
		}
	}
	if exited.reason != "" {
		t.Errorf("an attempt whose process exited has reason %q, want none", exited.reason)
	}
}

// TestStopSignal: the ends that are a stop from outside, not a failure:
// death by SIGTERM, SIGINT or SIGHUP, or a shell's exit 128 plus one of
// them; crashes and other exits are not.
func TestStopSignal(t *testing.T) {
	for _, tc := range []struct {
		sig  string
		code int
		want bool
	}{
		{"SIGTERM", 143, true}, {"SIGINT", 130, true}, {"SIGHUP", 129, true},
		{"", 143, true}, {"", 130, true}, {"", 129, true}, // bash after its command was killed
		{"SIGKILL", 137, false}, {"", 137, false}, // the OOM killer, or a kill -9: by the window only
		{"SIGSEGV", 139, false}, {"SIGABRT", 134, false}, {"", 1, false}, {"", 3, false}, {"", 0, false},
		{"SIGUSR1", 138, false},
	} {
		if got := StopSignal(tc.sig, tc.code); got != tc.want {
			t.Errorf("StopSignal(%q, %d) = %v, want %v", tc.sig, tc.code, got, tc.want)
		}
	}
}
