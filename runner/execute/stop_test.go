package execute

import (
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// TestStopAfterExit: a stop that comes once the attempt's process has
// exited by itself (its timeout firing, or a pruning judgement taken, as
// it exits) stops nothing and gives no reason: the attempt ends as its
// exit says. Before the exit, the first stop's reason is the one kept.
func TestStopAfterExit(t *testing.T) {
	running := &runStop{p: &process{exited: make(chan struct{})}}
	if !running.begin(run.Pruned) || running.begin(run.TimedOut) || running.reason != run.Pruned {
		t.Errorf("a running attempt: reason %q, want the first stop's, pruned", running.reason)
	}
	exited := &runStop{p: &process{exited: make(chan struct{})}}
	close(exited.p.exited)
	for _, reason := range []run.Reason{run.Pruned, run.TimedOut, run.Interrupted} {
		if exited.begin(reason) {
			t.Errorf("an attempt whose process exited was stopped for %s", reason)
		}
	}
	if exited.reason != "" {
		t.Errorf("an attempt whose process exited has reason %q, want none", exited.reason)
	}
}
