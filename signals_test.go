package nodepack

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/nodepack/nodepack/runner"
)

// TestNotifyStop: the first stop signal cancels the context with an
// Interrupt, after onSignal saw it (runs are counted before they get
// SIGTERM); only a warning before a time limit asks for a requeue; later
// signals reach onSignal and cancel nothing more.
func TestNotifyStop(t *testing.T) {
	for _, tc := range []struct {
		sig     syscall.Signal
		requeue bool
	}{{syscall.SIGTERM, false}, {syscall.SIGINT, false}, {syscall.SIGHUP, false}, {syscall.SIGUSR1, true}, {syscall.SIGUSR2, true}} {
		ch := make(chan os.Signal)
		seen := make(chan int)
		var ctx context.Context
		ctx, stop := notifyStop(context.Background(), ch, func(sig syscall.Signal, before int) {
			if sig != tc.sig {
				t.Errorf("onSignal(%v), want %v", sig, tc.sig)
			}
			if before == 0 && ctx.Err() != nil {
				t.Errorf("%v: the context was cancelled before onSignal saw the first signal", tc.sig)
			}
			seen <- before
		})
		ch <- tc.sig
		if n := <-seen; n != 0 {
			t.Errorf("%v: first signal had %d before it", tc.sig, n)
		}
		<-ctx.Done()
		var in runner.Interrupt
		if !errors.As(context.Cause(ctx), &in) || in.Requeue != tc.requeue {
			t.Errorf("%v: cause %v, want an Interrupt with Requeue %v", tc.sig, context.Cause(ctx), tc.requeue)
		}
		ch <- tc.sig
		if n := <-seen; n != 1 {
			t.Errorf("%v: second signal had %d before it, want 1", tc.sig, n)
		}
		stop()
	}
}
